// HTTP/1.1 on Boost.Beast over Asio: every connection is a chain of asynchronous operations on
// a few I/O threads (no thread per connection). A streamed response is written one coalesced
// batch of events at a time, so a client that reads slowly only delays itself. While a
// generation runs, a pending read notices the client leaving, and its request is aborted.
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
  // Closes every connection and joins the I/O threads.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
