#include "server/http_framing.h"

#include <fmt/format.h>

#include <boost/beast/core/string.hpp>

namespace nanovllm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

std::string to_string(beast::string_view text) {
  return std::string(text.data(), text.size());
}

}  // namespace

std::optional<HttpRefusal> refusal_by_header(const HttpRequestParser& parser,
                                             size_t max_body_bytes) {
  const HttpRequest& request = parser.get();
  if (const auto length = parser.content_length(); length && *length > max_body_bytes) {
    return HttpRefusal{413, fmt::format("the request body has {} bytes, more than the limit of {}",
                                        *length, max_body_bytes)};
  }
  const auto coding = request.find(http::field::transfer_encoding);
  if (coding != request.end()) {
    // The parser takes any list that ends in chunked; only chunked itself is read correctly.
    std::string codings = to_string(coding->value());
    std::erase_if(codings, [](char c) { return c == ' ' || c == '\t'; });
    if (!beast::iequals(codings, "chunked")) {
      return HttpRefusal{
          501, fmt::format("Transfer-Encoding '{}' is not supported; send the body as it is or "
                           "chunked",
                           codings.size() > 64 ? codings.substr(0, 64) + "..." : codings)};
    }
  }
  return std::nullopt;
}

std::optional<HttpRefusal> refusal_by_read_error(beast::error_code error, size_t max_body_bytes) {
  if (error == http::error::body_limit) {
    return HttpRefusal{
        413, fmt::format("the request body is over the limit of {} bytes", max_body_bytes)};
  }
  if (error == http::error::header_limit) {
    return HttpRefusal{431, fmt::format("the request headers are over {} bytes", kMaxHeaderBytes)};
  }
  if (error.category() == http::make_error_code(http::error::bad_version).category() &&
      error != http::error::end_of_stream && error != http::error::partial_message) {
    return HttpRefusal{400, fmt::format("malformed HTTP request: {}", error.message())};
  }
  return std::nullopt;
}

HttpCall to_call(HttpRequest& request) {
  HttpCall call;
  call.method = to_string(request.method_string());
  const std::string target = to_string(request.target());
  call.path = target.substr(0, target.find('?'));
  call.body = std::move(request.body());
  call.authorization = to_string(request[http::field::authorization]);
  return call;
}

std::string status_line(int status) {
  return fmt::format("HTTP/1.1 {} {}\r\n", status,
                     to_string(http::obsolete_reason(static_cast<http::status>(status))));
}

std::string serialize_reply(const HttpReply& reply, bool keep_alive) {
  return status_line(reply.status) +
         fmt::format("Content-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
                     reply.content_type, reply.body.size(), keep_alive ? "keep-alive" : "close") +
         reply.body;
}

std::string EventStreamFraming::header() const {
  return status_line(200) +
         fmt::format(
             "Content-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
             "{}Connection: {}\r\n\r\n",
             chunked ? "Transfer-Encoding: chunked\r\n" : "", keep_alive ? "keep-alive" : "close");
}

std::string EventStreamFraming::data(const std::string& events) const {
  if (events.empty() || !chunked) return events;
  return fmt::format("{:x}\r\n{}\r\n", events.size(), events);
}

std::string EventStreamFraming::end() const {
  return chunked ? "0\r\n\r\n" : "";
}

}  // namespace nanovllm
