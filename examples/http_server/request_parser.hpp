// RequestParser: http_server's strict HTTP/1.1 request framing (RFC 9112), on Boost.Beast's
// basic_parser (header-only, in the Boost the project already uses), with the rules Beast leaves
// to its user added on top. It splits a connection's bytes into requests and says, for each, the
// route and how the connection goes on, or why the request is rejected and with which status; it
// needs no weft runtime. One parser per connection; not thread-safe (the connection's fiber owns
// it).
//
// Why Beast and not Node's http_parser (which the server used before): Debian's
// libhttp-parser-dev is built without HTTP_PARSER_STRICT, and so accepts whitespace before a
// header's colon ("Transfer-Encoding : chunked" framed the body as chunked) and swallows the two
// bytes after chunk data whatever they are; its strict mode is a compile-time switch of the .c,
// so it would have to be vendored. Beast rejects both as they are, parses the whole request
// faster (instruction counts in the commit that made the switch), and needs no library.
//
// What Beast checks: the request line's grammar (one SP between the parts, "HTTP/" DIGIT "."
// DIGIT, versions 1.0 and 1.1 only), CRLF line ends in the head and around chunks, header names
// as tokens (so no whitespace before the colon), no control characters in values, Content-Length
// as digits (no sign, no overflow; a list only of equal values) and in conflict with
// Transfer-Encoding in either order, chunk sizes as hex without overflow, chunk extensions'
// grammar, the head's size (kMaxHead) and the body's (max_body).
// What this class adds, each the RFC's rule or the stricter of its choices, as nginx does:
//   - one Host header in HTTP/1.1, at most one in 1.0 (RFC 9112 3.2), a host[:port] that is not
//     empty (RFC 9110 4.2.1, 7.2): else 400;
//   - one Content-Length header, a single number (RFC 9110 8.6 lets a server reject a list);
//   - Transfer-Encoding: exactly "chunked", in HTTP/1.1 only (RFC 9112 6.1, 6.3): a list whose
//     last coding is chunked gets 501 (a coding the server does not implement), anything else
//     400; in HTTP/1.0 400, the framing being faulty;
//   - obs-fold (a header line continued on the next; Beast would join it): 400 (RFC 9112 5.2);
//   - a bare LF or CR in the head or a chunk line: 400 at once (Beast would wait for CRLF CRLF,
//     until the header timeout), as RFC 9112 2.2 allows;
//   - a well-formed version other than 1.0 and 1.1: 505 (Beast says "bad version");
//   - a request target over kMaxTarget bytes, or a request line that has not ended within it:
//     414; a head over kMaxHead bytes otherwise: 431;
//   - CONNECT: 405 and a close (the server is not a proxy);
//   - Upgrade: ignored, as RFC 9110 7.8 allows (curl's h2c upgrade then goes on in HTTP/1.1),
//     and the connection closes after the one response, since the client may follow with bytes
//     of the protocol it asked for;
//   - empty lines before a request line are skipped (RFC 9112 2.2).
// Every rejection ends the connection: the server answers it and closes.
//
//   RequestParser p(max_body);
//   const char* at = data; const char* end = data + n;
//   for (;;) {
//     switch (p.next(at, end)) {
//       case RequestParser::kRequest: serve(p.request()); continue;   // the next one may follow
//       case RequestParser::kNeedMore: break;   // keep [at, end) and call again with more bytes
//       case RequestParser::kRejected: answer(p.rejection()); close;
//     }
//   }
#pragma once

#include <array>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace http_example {

// The longest request target answered (nginx's large_client_header_buffers line is 8 KiB).
inline constexpr std::size_t kMaxTarget = 8192;
// The largest request head (request line and headers): nginx's 4 buffers of 8 KiB.
inline constexpr std::uint32_t kMaxHead = 32 * 1024;

enum class Route : std::uint8_t { kHello, kStats, kMetrics, kNotFound, kMethodNotAllowed };

// A complete request.
struct Request {
  Route route = Route::kNotFound;
  bool head = false;        // HEAD: the response has no body
  bool keep_alive = false;  // the connection goes on after the response
};

// A rejected request: the status to answer (then the connection closes) and why.
struct Rejection {
  int status = 0;
  const char* reason = "";  // the reason phrase
  std::string detail;       // for the response's body
};

namespace detail {

namespace bhttp = boost::beast::http;

inline std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

// A Host value: uri-host [":" port] (RFC 9110 7.2), not empty (an http URI has a host: RFC 9110
// 4.2.1): the characters of a reg-name, an IP literal or a port.
inline bool valid_host(std::string_view h) {
  static constexpr auto kHostChar = [] {
    std::array<bool, 256> t{};
    for (int c = 'a'; c <= 'z'; ++c) t[c] = t[c - 'a' + 'A'] = true;
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    for (const char c : std::string_view("-._~!$&'()*+,;=%:[]"))
      t[static_cast<unsigned char>(c)] = true;
    return t;
  }();
  if (h.empty()) return false;
  for (const char c : h) {
    if (!kHostChar[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// "chunked", in any case (coding names are case-insensitive, RFC 9112 7).
inline bool is_chunked(std::string_view s) {
  constexpr std::string_view kChunked = "chunked";
  if (s.size() != kChunked.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((s[i] | 0x20) != kChunked[i]) return false;
  }
  return true;
}

class BeastRequestParser final : public bhttp::basic_parser<true> {
 public:
  explicit BeastRequestParser(std::uint64_t max_body) {
    header_limit(kMaxHead);
    body_limit(max_body);
    eager(true);  // parse on through the body in one put()
  }

  // The bytes put() is given: a header value outside them was rebuilt by Beast from an obs-fold.
  void set_input(const char* begin, const char* end) {
    in_begin_ = begin;
    in_end_ = end;
  }
  bool line_done() const { return line_done_; }

  Request request;
  Rejection rejection;  // status 0: none

 private:
  void reject(boost::beast::error_code& ec, int status, const char* reason, std::string detail) {
    rejection = {status, reason, std::move(detail)};
    ec = bhttp::error::bad_field;  // stops the parse; next() reports `rejection` instead
  }

  void on_request_impl(bhttp::verb method, boost::beast::string_view, boost::beast::string_view t,
                       int version, boost::beast::error_code& ec) override {
    line_done_ = true;
    http11_ = version == 11;
    std::string_view target = sv(t);
    if (target.size() > kMaxTarget) {
      return reject(ec, 414, "URI Too Long",
                    "the request target is longer than " + std::to_string(kMaxTarget) + " bytes");
    }
    if (method == bhttp::verb::connect) {
      return reject(ec, 405, "Method Not Allowed", "CONNECT: this server is not a proxy");
    }
    request.head = method == bhttp::verb::head;
    if (method != bhttp::verb::get && !request.head) {
      request.route = Route::kMethodNotAllowed;
      return;
    }
    // absolute-form (RFC 9112 3.2.2): the path is what follows the authority.
    if (!target.empty() && target[0] != '/') {
      const std::size_t scheme = target.find("://");
      const std::size_t path = scheme == std::string_view::npos ? 0 : target.find('/', scheme + 3);
      target = path == std::string_view::npos || scheme == std::string_view::npos
                   ? std::string_view()
                   : target.substr(path);
    }
    target = target.substr(0, target.find('?'));
    request.route = target == "/"          ? Route::kHello
                    : target == "/stats"   ? Route::kStats
                    : target == "/metrics" ? Route::kMetrics
                                           : Route::kNotFound;
  }

  void on_response_impl(int, boost::beast::string_view, int, boost::beast::error_code&) override {}

  void on_field_impl(bhttp::field f, boost::beast::string_view name,
                     boost::beast::string_view value, boost::beast::error_code& ec) override {
    // obs-fold: Beast joins the lines into a buffer of its own, or (an empty first line) starts
    // the value after the fold's CRLF.
    bool folded = value.data() < in_begin_ || value.data() > in_end_;
    for (const char* c = name.data() + name.size() + 1; !folded && c < value.data(); ++c) {
      folded = *c == '\n';
    }
    if (folded) {
      return reject(ec, 400, "Bad Request",
                    "header " + std::string(sv(name)) +
                        " continues on the next line (obs-fold, RFC 9112 5.2)");
    }
    switch (f) {
      case bhttp::field::host:
        if (host_seen_) return reject(ec, 400, "Bad Request", "more than one Host header");
        host_seen_ = true;
        if (!valid_host(sv(value))) {
          return reject(ec, 400, "Bad Request",
                        "Host \"" + std::string(sv(value)) + "\" is not a host[:port]");
        }
        return;
      case bhttp::field::content_length:
        if (length_seen_) {
          return reject(ec, 400, "Bad Request", "more than one Content-Length header");
        }
        length_seen_ = true;
        if (sv(value).find(',') != std::string_view::npos) {
          return reject(ec, 400, "Bad Request", "Content-Length is a list");
        }
        return;
      case bhttp::field::transfer_encoding: {
        if (!http11_) {
          return reject(ec, 400, "Bad Request",
                        "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)");
        }
        const std::string_view v = sv(value);
        if (is_chunked(v)) return;
        const std::size_t comma = v.rfind(',');
        std::string_view last = comma == std::string_view::npos ? v : v.substr(comma + 1);
        while (!last.empty() && (last.front() == ' ' || last.front() == '\t'))
          last.remove_prefix(1);
        if (comma != std::string_view::npos && is_chunked(last)) {
          return reject(ec, 501, "Not Implemented",
                        "Transfer-Encoding " + std::string(v) + ": only chunked is implemented");
        }
        return reject(ec, 400, "Bad Request",
                      "Transfer-Encoding " + std::string(v) +
                          " does not end in chunked: the body's length is unknown (RFC 9112 6.3)");
      }
      case bhttp::field::upgrade:
        upgrade_ = true;
        return;
      default:
        return;
    }
  }

  void on_header_impl(boost::beast::error_code& ec) override {
    if (http11_ && !host_seen_) {
      return reject(ec, 400, "Bad Request", "HTTP/1.1 request without a Host header");
    }
    request.keep_alive = keep_alive() && !upgrade_ && !upgrade();
  }

  void on_body_init_impl(const boost::optional<std::uint64_t>&,
                         boost::beast::error_code&) override {}
  std::size_t on_body_impl(boost::beast::string_view body, boost::beast::error_code&) override {
    return body.size();  // read and discarded
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view,
                            boost::beast::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body,
                                 boost::beast::error_code&) override {
    return body.size();
  }
  void on_finish_impl(boost::beast::error_code&) override {}

  const char* in_begin_ = nullptr;
  const char* in_end_ = nullptr;
  bool line_done_ = false;
  bool http11_ = false;
  bool host_seen_ = false;
  bool length_seen_ = false;
  bool upgrade_ = false;
};

}  // namespace detail

class RequestParser {
 public:
  enum Result { kRequest, kNeedMore, kRejected };

  explicit RequestParser(std::uint64_t max_body) : max_body_(max_body) {
    parser_.emplace(max_body_);
  }

  // Parses from `at` (advanced past what was used) up to `end`: kRequest when a request is
  // complete (request(); call again for the next), kNeedMore when all of [at, end) that could be
  // used was (what is left, a partial line, must be given again with the bytes that follow),
  // kRejected when the request is malformed (rejection()).
  Result next(const char*& at, const char* end) {
    if (done_) {  // the last call completed a request: a new one starts
      parser_.emplace(max_body_);
      done_ = false;
      scanned_ = 0;
    }
    if (!parser_->got_some()) {
      while (end - at >= 2 && at[0] == '\r' && at[1] == '\n') at += 2;  // empty lines
    }
    if (at == end) return kNeedMore;
    boost::beast::error_code ec;
    parser_->set_input(at, end);
    const std::size_t used = parser_->put(boost::asio::const_buffer(at, end - at), ec);
    at += used;
    if (used > 0) scanned_ = 0;
    if (parser_->rejection.status != 0) return kRejected;
    if (!ec || ec == detail::bhttp::error::need_more) {
      if (parser_->is_done()) {
        done_ = true;
        return kRequest;
      }
      return check_partial(at, end);
    }
    if (ec == detail::bhttp::error::body_limit) {
      return reject(413, "Content Too Large",
                    "request body larger than " + std::to_string(max_body_) +
                        " bytes (the server's --max_body)");
    }
    if (ec == detail::bhttp::error::header_limit) return too_long();
    if (ec == detail::bhttp::error::bad_version && other_version(at, end)) {
      return reject(505, "HTTP Version Not Supported", "only HTTP/1.0 and HTTP/1.1 are served");
    }
    return reject(400, "Bad Request", ec.message());
  }

  const Request& request() const { return parser_->request; }
  const Rejection& rejection() const { return parser_->rejection; }
  // A request has begun (bytes of it arrived) and is not complete.
  bool in_request() const { return !done_ && parser_->got_some(); }
  // Its head is complete (its body is being read).
  bool head_done() const { return !done_ && parser_->is_header_done(); }

 private:
  Result reject(int status, const char* reason, std::string detail) {
    parser_->rejection = {status, reason, std::move(detail)};
    return kRejected;
  }
  Result too_long() {
    return parser_->line_done()
               ? reject(431, "Request Header Fields Too Large",
                        "request head larger than " + std::to_string(kMaxHead) + " bytes")
               : reject(414, "URI Too Long",
                        "the request line is longer than " + std::to_string(kMaxTarget) + " bytes");
  }

  // [at, end) is left over, waiting for more: a partial head line, or a partial chunk line
  // (chunk data is always used). Lines there end in CRLF and nothing else; a request line that has
  // not ended within kMaxTarget (and room for the method and version) is too long already.
  Result check_partial(const char* at, const char* end) {
    const auto n = static_cast<std::size_t>(end - at);
    if (n == 0 || (parser_->is_header_done() && !parser_->chunked())) return kNeedMore;
    for (std::size_t i = scanned_; i < n; ++i) {
      if (at[i] == '\n' && (i == 0 || at[i - 1] != '\r')) {
        return reject(400, "Bad Request", "a line ends in a bare LF, not CRLF (RFC 9112 2.2)");
      }
      if (at[i] == '\r' && i + 1 < n && at[i + 1] != '\n') {
        return reject(400, "Bad Request", "a bare CR (RFC 9112 2.2)");
      }
    }
    scanned_ = n - 1;  // the last byte may be a CR whose LF has not come yet
    if (!parser_->line_done() && n > kMaxTarget + 64 && !std::memchr(at, '\n', n)) {
      return too_long();
    }
    return kNeedMore;
  }

  // The request line at `at` ends in a well-formed " HTTP/" DIGIT "." DIGIT of a version other than
  // 1.0 and 1.1 (which Beast refused for something else in the line).
  static bool other_version(const char* at, const char* end) {
    const std::string_view rest(at, static_cast<std::size_t>(end - at));
    const std::size_t eol = rest.find("\r\n");
    if (eol == std::string_view::npos || eol < 9) return false;
    const std::string_view v = rest.substr(eol - 9, 9);
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    return v.substr(0, 6) == " HTTP/" && digit(v[6]) && v[7] == '.' && digit(v[8]) &&
           v.substr(6) != "1.0" && v.substr(6) != "1.1";
  }

  std::uint64_t max_body_;
  std::optional<detail::BeastRequestParser> parser_;
  bool done_ = false;
  std::size_t scanned_ = 0;  // of the bytes left over, how many check_partial() has checked
};

}  // namespace http_example
