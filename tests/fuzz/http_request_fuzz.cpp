// One HTTP request as a client sends it to `nanovllm serve`, without a socket: the parser with
// the server's limits, what the header alone refuses, then the endpoints over the tiny model on
// the CPU (a generation is aborted as soon as it is submitted). Every refusal and reply must be a
// known status, and every error an OpenAI-style JSON body.
#include <boost/beast/core/flat_buffer.hpp>

#include <set>

#include "core/check.h"
#include "core/json_input.h"
#include "fuzz_support.h"
#include "nanovllm/llm.h"
#include "server/api_routes.h"
#include "server/engine_service.h"
#include "server/http_framing.h"
#include "server/server_metrics.h"

using namespace nanovllm;

namespace {

constexpr size_t kMaxBodyBytes = 1 << 20;

struct Server {
  Server()
      : llm(fuzz::test_data("models/qwen3-tiny-tied"), config()),
        metrics("fuzz"),
        service(llm.engine(), metrics, 64),
        routes(llm, service, metrics, {"fuzz", "fuzz", "key", 16}) {}

  static EngineConfig config() {
    EngineConfig config;
    config.device = "cpu";
    config.max_model_len = 256;
    return config;
  }

  LLM llm;
  ServerMetrics metrics;
  EngineService service;
  ApiRoutes routes;
};

Server& server() {
  static Server instance;
  return instance;
}

void check_error_body(const HttpReply& reply) {
  const auto body = parse_json<nlohmann::ordered_json>(reply.body);
  FUZZ_ASSERT(body.contains("error") && body["error"]["code"] == reply.status);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::set<int> kStatuses = {200, 400, 401, 404, 405, 413, 431, 501, 503};
  HttpRequestParser parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(kMaxBodyBytes);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (!parser.is_done() && used < size) {
    const size_t n = parser.put(boost::asio::const_buffer(data + used, size - used), ec);
    used += n;
    if (ec == boost::beast::http::error::need_more) ec = {};
    if (ec || n == 0) break;
  }
  FUZZ_ASSERT(used <= size);
  if (!ec && !parser.is_done()) parser.put_eof(ec);  // the client sent nothing more
  if (ec) {
    if (auto refusal = refusal_by_read_error(ec, kMaxBodyBytes)) {
      FUZZ_ASSERT(kStatuses.contains(refusal->status));
    }
    return 0;
  }
  if (auto refusal = refusal_by_header(parser, kMaxBodyBytes)) {
    FUZZ_ASSERT(refusal->status == 413 || refusal->status == 501);
    return 0;
  }
  HttpCall call = to_call(parser.get());
  RouteResult result = server().routes.handle(call, [] {});
  if (result.generation) {
    server().service.abort(result.generation->stream);
    return 0;
  }
  FUZZ_ASSERT(kStatuses.contains(result.reply.status));
  if (result.reply.status != 200) check_error_body(result.reply);
  return 0;
}
