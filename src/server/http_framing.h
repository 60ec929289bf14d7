// HTTP/1.x framing apart from sockets: what a request's header alone refuses, the call the
// endpoints see, and the bytes of replies and event streams (chunked for HTTP/1.1,
// close-delimited for HTTP/1.0, which has no chunked coding).
#pragma once

#include <boost/beast/http.hpp>

#include <cstddef>
#include <optional>
#include <string>

#include "server/api_routes.h"

namespace nanovllm {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpRequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

constexpr size_t kMaxHeaderBytes = 16 * 1024;

struct HttpRefusal {
  int status;
  std::string message;
};

// 413 for a declared body over `max_body_bytes`; 501 for a transfer coding other than chunked
// (a gzip body would otherwise be read as if it were plain).
std::optional<HttpRefusal> refusal_by_header(const HttpRequestParser& parser,
                                             size_t max_body_bytes);

// A refusal for the error the parser stopped with, or nullopt when the client merely left
// (end of stream, reset, timeout).
std::optional<HttpRefusal> refusal_by_read_error(boost::beast::error_code error,
                                                 size_t max_body_bytes);

// The parts of a whole request the endpoints look at; moves the body out.
HttpCall to_call(HttpRequest& request);

std::string status_line(int status);
std::string serialize_reply(const HttpReply& reply, bool keep_alive);

// A server-sent-event stream: its header, each piece of data, and its end.
struct EventStreamFraming {
  bool chunked = true;  // false for HTTP/1.0: the data as is, the end of the stream a close
  bool keep_alive = true;

  std::string header() const;
  std::string data(const std::string& events) const;
  std::string end() const;
};

}  // namespace nanovllm
