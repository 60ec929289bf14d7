#include "nanovllm/serve_command.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <iostream>
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

// Every connection is a file descriptor; the soft limit (often 1,024) is raised to the hard one.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    NVLLM_LOG_WARN("could not raise the open-file limit; connections are limited to about {}",
                   limit.rlim_cur);
  }
}

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
  raise_open_file_limit();
  LLM llm(options.model, config);
  ServerMetrics metrics(name);
  EngineService service(llm.engine(), metrics, options.max_pending_requests);
  ApiRoutes routes(llm, service, metrics, {name, options.model, options.api_key});
  HttpServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.max_body_bytes = options.max_request_body_bytes;
  http.io_threads = options.io_threads;
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
