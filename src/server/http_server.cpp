#include "server/http_server.h"

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/logging.h"
#include "server/api_routes.h"
#include "server/engine_service.h"

namespace nanovllm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxHeaderBytes = 16 * 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(120);  // between requests on a connection
constexpr auto kDrainTimeout = std::chrono::seconds(5);   // reading what follows a refused body

struct ServerState {
  ApiRoutes& routes;
  EngineService& service;
  HttpServerOptions options;
  std::atomic<int> active_generations{0};
};

std::string to_string(beast::string_view text) {
  return std::string(text.data(), text.size());
}

std::string status_line(int status) {
  return fmt::format("HTTP/1.1 {} {}\r\n", status,
                     to_string(http::obsolete_reason(static_cast<http::status>(status))));
}

std::string serialize(const HttpReply& reply, bool keep_alive) {
  return status_line(reply.status) +
         fmt::format("Content-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
                     reply.content_type, reply.body.size(), keep_alive ? "keep-alive" : "close") +
         reply.body;
}

std::string sse_header(bool keep_alive) {
  return status_line(200) +
         fmt::format(
             "Content-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
             "Transfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
             keep_alive ? "keep-alive" : "close");
}

std::string http_chunk(const std::string& data) {
  return data.empty() ? "" : fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState& state)
      : stream_(std::move(socket)),
        state_(state),
        buffer_(kMaxHeaderBytes + state.options.max_body_bytes) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

 private:
  enum class After { kContinueStream, kNextRequest, kDrainAndClose };

  void read_header() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(state_.options.max_body_bytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& request = parser_->get();
    if (const auto length = parser_->content_length();
        length && *length > state_.options.max_body_bytes) {
      return refuse(413, fmt::format("the request body has {} bytes, more than the limit of {}",
                                     *length, state_.options.max_body_bytes));
    }
    if (beast::iequals(request[http::field::expect], "100-continue")) {
      write(status_line(100) + "\r\n", After::kNextRequest, /*then_body=*/true);
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->on_read_error(ec);
                       self->on_request();
                     });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return refuse(413, fmt::format("the request body is over the limit of {} bytes",
                                     state_.options.max_body_bytes));
    }
    if (ec == http::error::header_limit) {
      return refuse(431, fmt::format("the request headers are over {} bytes", kMaxHeaderBytes));
    }
    if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return refuse(400, fmt::format("malformed HTTP request: {}", ec.message()));
    }
    close();  // end of stream, reset, timeout
  }

  void on_request() {
    auto& request = parser_->get();
    keep_alive_ = request.keep_alive();
    HttpCall call;
    call.method = to_string(request.method_string());
    const std::string target = to_string(request.target());
    call.path = target.substr(0, target.find('?'));
    call.body = std::move(request.body());
    call.authorization = to_string(request[http::field::authorization]);
    std::weak_ptr<Session> weak = weak_from_this();
    const auto executor = stream_.get_executor();
    auto notify = [weak, executor] {
      net::post(executor, [weak] {
        if (auto self = weak.lock()) self->pump();
      });
    };
    RouteResult result = state_.routes.handle(call, notify);
    if (!result.generation) {
      write(serialize(result.reply, keep_alive_),
            keep_alive_ ? After::kNextRequest : After::kDrainAndClose);
      return;
    }
    generation_ = std::move(result.generation);
    ++state_.active_generations;
    stream_.expires_never();
    watch_for_disconnect();
    if (generation_->streaming) {
      write(sse_header(keep_alive_) + http_chunk(generation_->response.start_events()),
            After::kContinueStream);
    }
    pump();
  }

  // Takes what the engine produced and writes it, one write at a time.
  void pump() {
    if (!generation_ || writing_ || closed_) return;
    GenerationCall& call = *generation_;
    auto updates = call.stream->take();
    if (call.streaming) {
      std::string data = http_chunk(call.response.events(std::move(updates)));
      if (call.response.done()) {
        if (!call.response.finished()) state_.service.abort(call.stream);  // a choice failed
        end_generation();
        write(data + "0\r\n\r\n", keep_alive_ ? After::kNextRequest : After::kDrainAndClose);
      } else if (!data.empty()) {
        write(std::move(data), After::kContinueStream);
      }
      return;
    }
    call.response.add(std::move(updates));
    if (const ChoiceUpdate* failed = call.response.error()) {
      const HttpReply reply = ApiRoutes::error_reply(failed->error_status, failed->error);
      if (!call.response.finished()) state_.service.abort(call.stream);
      end_generation();
      write(serialize(reply, keep_alive_),
            keep_alive_ ? After::kNextRequest : After::kDrainAndClose);
      return;
    }
    if (!call.response.finished()) return;
    const std::string body = call.response.response().dump(
        -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    end_generation();
    write(serialize({200, "application/json", body}, keep_alive_),
          keep_alive_ ? After::kNextRequest : After::kDrainAndClose);
  }

  void write(std::string data, After after, bool then_body = false) {
    out_ = std::move(data);
    writing_ = true;
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this(), after, then_body](beast::error_code ec, size_t) {
                       self->on_written(ec, after, then_body);
                     });
  }

  void on_written(beast::error_code ec, After after, bool then_body) {
    writing_ = false;
    if (closed_) return;
    if (ec) return client_gone();
    if (then_body) return read_body();
    switch (after) {
      case After::kContinueStream:
        return pump();
      case After::kNextRequest:
        if (watching_) {
          read_after_watch_ = true;  // once the pending watch read returns
          beast::error_code ignored;
          stream_.socket().cancel(ignored);
        } else {
          read_header();
        }
        return;
      case After::kDrainAndClose:
        return drain_and_close();
    }
  }

  // While a generation runs, a read that completes with an error means the client left.
  void watch_for_disconnect() {
    watching_ = true;
    stream_.async_read_some(
        net::buffer(watch_buffer_),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    if (ec && ec != net::error::operation_aborted) return client_gone();
    if (n > 0) {
      // A pipelined request: keep it for the next read.
      if (buffer_.size() + n > buffer_.max_size()) return client_gone();
      buffer_.commit(net::buffer_copy(buffer_.prepare(n), net::buffer(watch_buffer_.data(), n)));
    }
    if (generation_) return watch_for_disconnect();
    if (std::exchange(read_after_watch_, false)) read_header();
  }

  void end_generation() {
    if (!generation_) return;
    generation_.reset();
    --state_.active_generations;
  }

  void client_gone() {
    if (generation_) state_.service.abort(generation_->stream);
    end_generation();
    close();
  }

  // Answers `status` and closes, reading (and dropping) what the client still sends first so
  // that it sees the answer rather than a reset.
  void refuse(int status, const std::string& message) {
    keep_alive_ = false;
    write(serialize(ApiRoutes::error_reply(status, message), false), After::kDrainAndClose);
  }

  void drain_and_close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kDrainTimeout);
    stream_.async_read_some(net::buffer(watch_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->drain_and_close();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    end_generation();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  ServerState& state_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<GenerationCall> generation_;
  std::string out_;
  std::array<char, 4096> watch_buffer_{};
  bool keep_alive_ = true;
  bool writing_ = false;
  bool watching_ = false;
  bool read_after_watch_ = false;
  bool closed_ = false;
};

}  // namespace

struct HttpServer::Impl {
  Impl(ApiRoutes& routes, EngineService& service, const HttpServerOptions& options)
      : state{routes, service, options, {}},
        acceptor(net::make_strand(context)),
        retry_timer(acceptor.get_executor()) {}

  void accept() {
    acceptor.async_accept(net::make_strand(context),
                          [this](beast::error_code ec, tcp::socket socket) {
                            if (!acceptor.is_open()) return;
                            if (ec) {
                              // Out of file descriptors, most likely: try again shortly rather than
                              // spin.
                              NVLLM_LOG_WARN("accept failed: {}", ec.message());
                              retry_timer.expires_after(std::chrono::milliseconds(50));
                              retry_timer.async_wait([this](beast::error_code) { accept(); });
                              return;
                            }
                            beast::error_code ignored;
                            socket.set_option(tcp::no_delay(true), ignored);
                            std::make_shared<Session>(std::move(socket), state)->start();
                            accept();
                          });
  }

  ServerState state;
  net::io_context context;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::vector<std::thread> threads;
  bool stopped = false;
};

HttpServer::HttpServer(ApiRoutes& routes, EngineService& service, const HttpServerOptions& options)
    : impl_(std::make_unique<Impl>(routes, service, options)) {
  if (options.io_threads < 1) throw Error("--io-threads must be at least 1");
  beast::error_code ec;
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
    beast::error_code ignored;
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
  impl_->context.stop();
  for (std::thread& thread : impl_->threads) thread.join();
  impl_->threads.clear();
}

}  // namespace nanovllm
