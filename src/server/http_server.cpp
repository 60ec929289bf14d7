#include "server/http_server.h"

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <fmt/format.h>

#include <boost/asio.hpp>

#include <algorithm>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/logging.h"
#include "server/http_connection.h"

namespace nanovllm {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// The worker lanes: small bodies are many and quick, large ones few and slow (and each holds up
// to --max-request-body-bytes while it waits).
constexpr int kSmallBodyThreads = 2;
constexpr size_t kSmallBodyQueue = 1024;
constexpr int kLargeBodyThreads = 2;
constexpr size_t kLargeBodyQueue = 16;

constexpr int kSendBufferBytes = 512 << 10;

// A failing accept (out of file descriptors, most likely) is retried after a pause that doubles
// up to a second, and logged at most once a minute.
constexpr auto kFirstAcceptRetry = std::chrono::milliseconds(10);
constexpr auto kLastAcceptRetry = std::chrono::milliseconds(1000);
constexpr auto kAcceptLogInterval = std::chrono::seconds(60);

}  // namespace

struct HttpServer::Impl {
  Impl(ApiRoutes& routes, EngineService& service, const HttpServerOptions& options)
      : small_bodies(kSmallBodyThreads, kSmallBodyQueue),
        large_bodies(kLargeBodyThreads, kLargeBodyQueue),
        state{routes, service, options, small_bodies, large_bodies},
        acceptor(net::make_strand(context)),
        retry_timer(acceptor.get_executor()) {}

  void accept() {
    acceptor.async_accept(net::make_strand(context),
                          [this](boost::system::error_code ec, tcp::socket socket) {
                            on_accept(ec, std::move(socket));
                          });
  }

  void on_accept(boost::system::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) return retry_accept(ec);
    accept_retry = {};
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    // Bounds the kernel memory a client that stops reading holds, and lets the write timeout
    // find it sooner.
    socket.set_option(net::socket_base::send_buffer_size(kSendBufferBytes), ignored);
    if (state.open_connections.load() >= state.options.max_connections) {
      refuse_connection(std::move(socket), state);
    } else {
      serve_connection(std::move(socket), state);
    }
    accept();
  }

  void retry_accept(boost::system::error_code ec) {
    ++accept_failures;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_accept_log) {
      NVLLM_LOG_WARN(
          "accepting a connection failed ({} time(s) since the last report): {}; {} connections "
          "are open (--max-connections {})",
          accept_failures, ec.message(), state.open_connections.load(),
          state.options.max_connections);
      accept_failures = 0;
      next_accept_log = now + kAcceptLogInterval;
    }
    accept_retry = std::clamp(accept_retry * 2, kFirstAcceptRetry, kLastAcceptRetry);
    retry_timer.expires_after(accept_retry);
    retry_timer.async_wait([this](boost::system::error_code) { accept(); });
  }

  WorkerLane small_bodies;
  WorkerLane large_bodies;
  ServerState state;
  net::io_context context;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::chrono::milliseconds accept_retry{0};
  size_t accept_failures = 0;
  std::chrono::steady_clock::time_point next_accept_log{};
  std::vector<std::thread> threads;
  bool stopped = false;
};

HttpServer::HttpServer(ApiRoutes& routes, EngineService& service, const HttpServerOptions& options)
    : impl_(std::make_unique<Impl>(routes, service, options)) {
  if (options.io_threads < 1) throw Error("--io-threads must be at least 1");
  if (options.max_connections < 1) throw Error("--max-connections must be at least 1");
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  if (ec)
    throw Error(fmt::format("--host '{}' is not an IP address: {}", options.host, ec.message()));
  if (options.port < 0 || options.port > 65535) {
    throw Error(fmt::format("--port {} is not in [0, 65535]", options.port));
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  tcp::acceptor& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(
        fmt::format("cannot listen on {}:{}: {}", options.host, options.port, ec.message()));
  }
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::start() {
  impl_->accept();
  for (int i = 0; i < impl_->state.options.io_threads; ++i) {
    impl_->threads.emplace_back([this] { impl_->context.run(); });
  }
}

void HttpServer::stop_accepting() {
  net::post(impl_->acceptor.get_executor(), [this] {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->retry_timer.cancel();
  });
}

bool HttpServer::wait_for_generations(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (impl_->state.active_generations.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  // The workers first: a job that finishes posts to the I/O threads, which must still run.
  impl_->small_bodies.stop();
  impl_->large_bodies.stop();
  impl_->context.stop();
  for (std::thread& thread : impl_->threads) thread.join();
  impl_->threads.clear();
}

}  // namespace nanovllm
