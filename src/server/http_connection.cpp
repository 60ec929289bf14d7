#include "server/http_connection.h"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <optional>

#include "core/logging.h"
#include "server/api_routes.h"
#include "server/engine_service.h"
#include "server/http_framing.h"

namespace nanovllm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(120);  // a whole request, or between requests
// After a reply that ends the connection, what the client still sends is read and dropped, so
// that it sees the reply rather than a reset: for this long in all, and at most this much.
constexpr auto kDrainTimeout = std::chrono::seconds(5);
constexpr auto kRefusedDrainTimeout = std::chrono::seconds(1);  // past the connection cap
constexpr size_t kMaxDrainBytes = 1 << 20;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ServerState& state)
      : stream_(std::move(socket)),
        state_(state),
        buffer_(kMaxHeaderBytes + state.options.max_body_bytes),
        write_timer_(stream_.get_executor()) {
    ++state_.open_connections;
  }
  ~Connection() { --state_.open_connections; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  void start_refused() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->refuse(503,
                   fmt::format("the server has {} connections open, its limit "
                               "(--max-connections); retry later",
                               self->state_.options.max_connections),
                   kRefusedDrainTimeout);
    });
  }

 private:
  enum class After { kContinueStream, kNextRequest, kClose };
  // What a read does once the connection may read again.
  enum class NextRead { kNothing, kRequest, kDrain };

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
    if (auto refusal = refusal_by_header(*parser_, state_.options.max_body_bytes)) {
      return refuse(refusal->status, refusal->message);
    }
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
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
    if (auto refusal = refusal_by_read_error(ec, state_.options.max_body_bytes)) {
      return refuse(refusal->status, refusal->message);
    }
    close();  // end of stream, reset, timeout
  }

  // The endpoint runs on a worker lane; its result comes back to this connection's strand.
  void on_request() {
    HttpRequest& request = parser_->get();
    keep_alive_ = request.keep_alive();
    http10_ = request.version() < 11;
    auto call = std::make_shared<HttpCall>(to_call(request));
    WorkerLane& lane =
        call->body.size() > kLargeBodyBytes ? state_.large_bodies : state_.small_bodies;
    std::weak_ptr<Connection> weak = weak_from_this();
    const auto executor = stream_.get_executor();
    auto notify = [weak, executor] {
      net::post(executor, [weak] {
        if (auto self = weak.lock()) self->pump();
      });
    };
    const bool queued = lane.try_post([self = shared_from_this(), call, notify, executor] {
      auto result = std::make_shared<RouteResult>(self->state_.routes.handle(*call, notify));
      net::post(executor, [self, result] { self->on_routed(std::move(*result)); });
    });
    if (!queued) {
      reply(ApiRoutes::error_reply(
          503, "the server is busy: too many requests are waiting to be read; retry later"));
    }
  }

  void on_routed(RouteResult result) {
    if (closed_) {
      if (result.generation) state_.service.abort(result.generation->stream);
      return;
    }
    if (!result.generation) return reply(result.reply);
    generation_ = std::move(result.generation);
    ++state_.active_generations;
    stream_.expires_never();
    watch_for_disconnect();
    if (generation_->streaming) {
      if (http10_) keep_alive_ = false;
      framing_ = {.chunked = !http10_, .keep_alive = keep_alive_};
      write(framing_.header() + framing_.data(generation_->response.start_events()),
            After::kContinueStream);
    }
    pump();
  }

  void reply(const HttpReply& reply) {
    write(serialize_reply(reply, keep_alive_), keep_alive_ ? After::kNextRequest : After::kClose);
  }

  // Takes what the engine produced and writes it, one write at a time.
  void pump() {
    if (!generation_ || writing_ || closed_) return;
    GenerationCall& call = *generation_;
    auto updates = call.stream->take();
    if (call.streaming) {
      std::string data = framing_.data(call.response.events(std::move(updates)));
      if (call.response.done()) {
        if (!call.response.finished()) state_.service.abort(call.stream);  // a choice failed
        end_generation();
        write(data + framing_.end(), keep_alive_ ? After::kNextRequest : After::kClose);
      } else if (!data.empty()) {
        write(std::move(data), After::kContinueStream);
      }
      return;
    }
    call.response.add(std::move(updates));
    if (const ChoiceUpdate* failed = call.response.error()) {
      const HttpReply error = ApiRoutes::error_reply(failed->error_status, failed->error);
      if (!call.response.finished()) state_.service.abort(call.stream);
      end_generation();
      return reply(error);
    }
    if (!call.response.finished()) return;
    std::string body = call.response.response().dump(
        -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    end_generation();
    reply({200, "application/json", std::move(body)});
  }

  // One write at a time; a client that has not read it within the write timeout is dropped.
  void write(std::string data, After after, bool then_body = false) {
    out_ = std::move(data);
    writing_ = true;
    const uint64_t serial = ++write_serial_;
    write_timer_.expires_after(state_.options.write_timeout);
    write_timer_.async_wait([self = shared_from_this(), serial](beast::error_code ec) {
      if (!ec && self->writing_ && self->write_serial_ == serial) self->on_write_stalled();
    });
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this(), after, then_body](beast::error_code ec, size_t) {
                       self->on_written(ec, after, then_body);
                     });
  }

  void on_write_stalled() {
    NVLLM_LOG_INFO("a client did not read its reply within {} ms; closing its connection",
                   state_.options.write_timeout.count());
    client_gone();
  }

  void on_written(beast::error_code ec, After after, bool then_body) {
    writing_ = false;
    write_timer_.cancel();
    if (closed_) return;
    if (ec) return client_gone();
    if (then_body) return read_body();
    switch (after) {
      case After::kContinueStream:
        return pump();
      case After::kNextRequest:
        return read_next(NextRead::kRequest);
      case After::kClose:
        return read_next(NextRead::kDrain);
    }
  }

  // One read at a time: a pending watch read is cancelled first, and `next` follows it.
  void read_next(NextRead next) {
    if (watching_) {
      after_watch_ = next;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
      return;
    }
    if (next == NextRead::kRequest) read_header();
    if (next == NextRead::kDrain) drain_and_close();
  }

  // While a generation runs, a read notices the client leaving (and keeps pipelined requests).
  void watch_for_disconnect() {
    watching_ = true;
    stream_.async_read_some(
        net::buffer(watch_buffer_),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    if (ec == net::error::eof) return on_end_of_requests();
    if (ec && ec != net::error::operation_aborted) return client_gone();
    if (n > 0) {
      // A pipelined request: keep it for the next read.
      if (buffer_.size() + n > buffer_.max_size()) return client_gone();
      buffer_.commit(net::buffer_copy(buffer_.prepare(n), net::buffer(watch_buffer_.data(), n)));
    }
    if (generation_) return watch_for_disconnect();
    read_next(std::exchange(after_watch_, NextRead::kNothing));
  }

  // The client's end of stream came while a generation runs: either it left, or it only
  // finished sending (a half-close) and waits for its reply. One that left answers the next
  // bytes it is sent with a reset, which the error wait sees; one that waits reads them as part
  // of its reply: an SSE comment in a stream, an interim 100 (Continue) before a whole reply.
  // HTTP/1.0 has no interim replies: such a request runs to its end.
  void on_end_of_requests() {
    keep_alive_ = false;
    if (!generation_) return read_next(std::exchange(after_watch_, NextRead::kNothing));
    stream_.socket().async_wait(tcp::socket::wait_error,
                                [self = shared_from_this()](beast::error_code ec) {
                                  if (!ec && !self->closed_) self->client_gone();
                                });
    if (writing_) return;  // what is being written is the probe
    if (generation_->streaming) {
      write(framing_.data(": waiting\n\n"), After::kContinueStream);
    } else if (!http10_) {
      write(status_line(100) + "\r\n", After::kContinueStream);
    }
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

  // Answers `status` and closes.
  void refuse(int status, const std::string& message,
              std::chrono::seconds drain_timeout = kDrainTimeout) {
    keep_alive_ = false;
    drain_timeout_ = drain_timeout;
    write(serialize_reply(ApiRoutes::error_reply(status, message), false), After::kClose);
  }

  void drain_and_close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(drain_timeout_);  // once, for the whole drain
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(watch_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_bytes_ += n;
                              if (ec || self->drained_bytes_ > kMaxDrainBytes) return self->close();
                              self->drain();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    end_generation();
    write_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  ServerState& state_;
  beast::flat_buffer buffer_;
  std::optional<HttpRequestParser> parser_;
  std::unique_ptr<GenerationCall> generation_;
  EventStreamFraming framing_;
  std::string out_;
  std::array<char, 4096> watch_buffer_{};
  net::steady_timer write_timer_;
  uint64_t write_serial_ = 0;
  std::chrono::seconds drain_timeout_ = kDrainTimeout;
  size_t drained_bytes_ = 0;
  bool keep_alive_ = true;
  bool http10_ = false;
  bool writing_ = false;
  bool watching_ = false;
  NextRead after_watch_ = NextRead::kNothing;
  bool closed_ = false;
};

}  // namespace

void serve_connection(tcp::socket socket, ServerState& state) {
  std::make_shared<Connection>(std::move(socket), state)->start();
}

void refuse_connection(tcp::socket socket, ServerState& state) {
  std::make_shared<Connection>(std::move(socket), state)->start_refused();
}

}  // namespace nanovllm
