#include "nanovllm/serve_command.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <thread>

#include "core/check.h"
#include "core/logging.h"
#include "nanovllm/llm.h"
#include "nanovllm/stop_signals.h"
#include "server/api_routes.h"
#include "server/engine_service.h"
#include "server/http_server.h"
#include "server/server_metrics.h"

namespace nanovllm {
namespace {

// Every connection is a file descriptor; the soft limit (often 1,024) is raised to the hard
// one. Returns the limit in force.
size_t raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t soft = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      NVLLM_LOG_WARN("could not raise the open-file limit from {}", soft);
      limit.rlim_cur = soft;
    }
  }
  return limit.rlim_cur == RLIM_INFINITY ? std::numeric_limits<int>::max()
                                         : static_cast<size_t>(limit.rlim_cur);
}

// Files the process keeps open besides connections: the model's, the GPU driver's, logs.
constexpr size_t kReservedFiles = 64;
constexpr size_t kMinDefaultConnections = 16;

constexpr auto kShutdownGrace = std::chrono::seconds(10);  // for final events to reach clients

}  // namespace

CLI::App* add_serve_command(CLI::App& app, ServeOptions& options) {
  CLI::App* command =
      app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  command->add_option("--model", options.model, "Hugging Face model directory")->required();
  command->add_option("--host", options.host, "IP address to listen on")->capture_default_str();
  command->add_option("--port", options.port, "TCP port (0 = any free one)")->capture_default_str();
  command
      ->add_option("--api-key", options.api_key,
                   "require 'Authorization: Bearer KEY' on /v1 endpoints")
      ->envname("NANOVLLM_API_KEY");
  command->add_option("--served-model-name", options.served_model_name,
                      "the model name clients ask for (default: the --model argument)");
  command
      ->add_option("--max-pending-requests", options.max_pending_requests,
                   "requests that may wait for a place in the batch; more get 503 at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--max-request-body-bytes", options.max_request_body_bytes,
                   "larger request bodies get 413")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--max-prompts-per-request", options.max_prompts_per_request,
                   "prompts one completions request may carry; more get 400")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--max-connections", options.max_connections,
                   "open connections; more get 503 and are closed (default: the open-file "
                   "limit, raised to its hard limit, less 64)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--write-timeout", options.write_timeout_seconds,
                   "seconds a client may take to read one write (a reply, or the stream events "
                   "gathered since its last read) before it is dropped and its request aborted")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--io-threads", options.io_threads, "threads serving the connections")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  options.engine.add_to(*command);
  return command;
}

int run_serve(const ServeOptions& options) {
  const EngineConfig config = options.engine.resolve();
  const std::string name =
      options.served_model_name.empty() ? options.model : options.served_model_name;
  StopSignals signals;
  const size_t open_file_limit = raise_open_file_limit();
  LLM llm(options.model, config);
  ServerMetrics metrics(name);
  EngineService service(llm.engine(), metrics, options.max_pending_requests);
  ApiRoutes routes(llm, service, metrics,
                   {name, options.model, options.api_key, options.max_prompts_per_request});
  HttpServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.max_body_bytes = options.max_request_body_bytes;
  http.io_threads = options.io_threads;
  http.max_connections = options.max_connections;
  if (http.max_connections == 0) {
    http.max_connections = open_file_limit > kReservedFiles + kMinDefaultConnections
                               ? open_file_limit - kReservedFiles
                               : kMinDefaultConnections;
  }
  http.write_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(options.write_timeout_seconds * 1000)));
  HttpServer server(routes, service, http);
  server.start();
  std::cout << fmt::format("nanovllm serve: '{}' on http://{}:{}", name, options.host,
                           server.port())
            << std::endl;

  while (signals.received() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  NVLLM_LOG_INFO("{}: stopping", signals.reason());
  server.stop_accepting();
  // In-flight requests end with an error event; the engine thread stops.
  service.shutdown(fmt::format("the server is shutting down ({})", signals.reason()));
  if (!server.wait_for_generations(kShutdownGrace)) {
    NVLLM_LOG_WARN("some clients did not take their last events within {} s",
                   kShutdownGrace.count());
  }
  server.stop();
  return 0;
}

}  // namespace nanovllm
