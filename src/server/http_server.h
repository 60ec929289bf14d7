// HTTP/1.1 on Boost.Beast over Asio: every connection is a chain of asynchronous operations on
// a few I/O threads (no thread per connection); the endpoints' work runs on worker lanes (small
// and large bodies apart), so nothing a client sends can stall the I/O threads. Every connection
// is bounded in time whatever its client does: idle and header timeouts, a write timeout for
// readers that stall, a bounded drain before a close, and a cap on open connections.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace nanovllm {

class ApiRoutes;
class EngineService;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port (see port())
  size_t max_body_bytes = 4 << 20;
  int io_threads = 1;
  // Connections past this many get 503 and are closed.
  size_t max_connections = 1000;
  // A client that has not read one write (a reply, or the stream events gathered since its last
  // read) within this long is dropped, its request aborted and its KV blocks freed.
  std::chrono::milliseconds write_timeout = std::chrono::seconds(60);
};

class HttpServer {
 public:
  // Binds and listens; throws Error when the address cannot be had.
  HttpServer(ApiRoutes& routes, EngineService& service, const HttpServerOptions& options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Starts accepting on the I/O threads.
  void start();
  // Closes the listening socket; open connections go on.
  void stop_accepting();
  // Waits until no generation is in flight (each has written its last event) or `timeout`
  // passed; returns whether none is left.
  bool wait_for_generations(std::chrono::milliseconds timeout);
  // Closes every connection and joins the I/O threads and the workers.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
