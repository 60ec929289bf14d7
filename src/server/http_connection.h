// One client connection of the HTTP server (http_server.h), and the state all connections share.
#pragma once

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <cstddef>

#include "server/http_server.h"
#include "server/worker_lane.h"

namespace nanovllm {

struct ServerState {
  ApiRoutes& routes;
  EngineService& service;
  HttpServerOptions options;
  WorkerLane& small_bodies;  // bodies up to kLargeBodyBytes: every GET, the usual API call
  WorkerLane& large_bodies;
  std::atomic<int> active_generations{0};
  std::atomic<size_t> open_connections{0};
};

// Bodies larger than this go to the large-body lane.
constexpr size_t kLargeBodyBytes = 16 * 1024;

// Serves requests on `socket` until the client leaves or a limit ends it.
void serve_connection(boost::asio::ip::tcp::socket socket, ServerState& state);
// Answers 503 at once (the connection cap is reached) and closes.
void refuse_connection(boost::asio::ip::tcp::socket socket, ServerState& state);

}  // namespace nanovllm
