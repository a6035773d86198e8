// http_server: HTTP/1.1 with keep-alive (and pipelining) in blocking style, one fiber per
// connection. Requests are framed by RequestParser (request_parser.hpp: strict RFC 9112 on
// Boost.Beast's basic_parser); every complete request gets a response, in order.
//
//   http_server --listen=127.0.0.1:8080 [--workers=N] [--drain_grace=1s]
//               [--tls-cert=FILE --tls-key=FILE]   (HTTPS: TLS 1.2/1.3, ALPN http/1.1)
//               [--header_timeout=10s] [--read_timeout=30s] [--idle_timeout=60s]
//               [--write_timeout=30s] [--output_budget=4096] [--output_limit=1048576]
//               [--max_body=1048576] [--max_conns=10000]
//
//   GET /        -> "Hello, World!"   (HEAD: the same headers, no body)
//   GET /stats   -> weft::stats() as JSON
//   GET /metrics -> weft::write_metrics(): Prometheus text format 0.0.4
//   other paths  -> 404; other methods -> 405
// A malformed request gets one response and the connection is closed: 400 (bad framing: whitespace
// before a colon, chunk data not ended by CRLF, bare LF, obs-fold, a missing or second Host,
// conflicting lengths, ...), 414 (a request target over 8 KiB), 431 (a head over 32 KiB), 501 (a
// transfer coding other than chunked), 505 (an HTTP version other than 1.0 and 1.1), 405 for
// CONNECT; a request asking to Upgrade is answered as HTTP/1.1 and the connection then closes
// (request_parser.hpp says which rule is whose). Request bodies are read and discarded, at most
// --max_body bytes: a larger one gets "413 Content Too Large" and a close.
// Hostile clients (examples/common/read_timeouts.hpp, write_bounds.hpp, connection_cap.hpp), as
// Go's http.Server and nginx bound them: a request head must arrive within --header_timeout (Go's
// ReadHeaderTimeout, nginx's client_header_timeout) of the connection's start (after the TLS
// handshake, itself bounded by --tls_handshake_timeout) for the first request, and of its first
// byte for the next ones; the whole request, body included, within --read_timeout (Go's
// ReadTimeout) of the same start. A request past either gets "408 Request Timeout" and a close;
// a connection that sent nothing is closed without a word. Between requests, a keep-alive
// connection waits at most --idle_timeout (Go's IdleTimeout, nginx's keepalive_timeout) for the
// next request's first byte, then closes quietly. Writes: a client that accepts no bytes of a
// response for --write_timeout (Go's WriteTimeout, nginx's send_timeout) is closed; a pipelining
// client is not read further once --output_budget bytes of its responses wait to be written,
// until they are, and one whose waiting responses pass --output_limit is closed. Past --max_conns
// connections at once a client gets "503 Service Unavailable" and a close; --max_conns is lowered
// to fit the fd limit, keeping fds to refuse with. Closes after a last response half-close and
// linger (linger_close.hpp), so the response is not lost to a reset. Prints "listening on
// HOST:PORT" once ready; SIGINT/SIGTERM drain it (weft::net::Server): it stops accepting, lets
// requests in flight finish for up to --drain_grace, then cancels the connections left (idle
// keep-alives) and exits.
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_cat.h>
#include <absl/time/time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <weft/weft.hpp>

#include "common/connection_cap.hpp"
#include "common/dashed_flags.hpp"
#include "common/linger_close.hpp"
#include "common/listen_announced.hpp"
#include "common/read_timeouts.hpp"
#include "common/shutdown_signal.hpp"
#include "common/write_bounds.hpp"
#include "http_server/request_parser.hpp"

ABSL_FLAG(std::string, listen, "127.0.0.1:8080", "address to listen on, HOST:PORT");
ABSL_FLAG(int, workers, 0, "weft workers (0: all CPUs)");
ABSL_FLAG(absl::Duration, drain_grace, absl::Seconds(1),
          "on SIGINT/SIGTERM, how long connections may finish before they are cancelled");
ABSL_FLAG(std::string, tls_cert, "",
          "serve HTTPS with this certificate chain (PEM); needs --tls-key");
ABSL_FLAG(std::string, tls_key, "", "the private key (PEM) of --tls-cert");
ABSL_FLAG(absl::Duration, tls_handshake_timeout, absl::Seconds(10),
          "HTTPS: a client that has not finished its TLS handshake by then is dropped");
ABSL_FLAG(absl::Duration, header_timeout, absl::Seconds(10),
          "a request head must arrive within this of the connection's start (first request) or "
          "of its first byte, else 408 and a close (Go's ReadHeaderTimeout; 0: no limit)");
ABSL_FLAG(absl::Duration, read_timeout, absl::Seconds(30),
          "the whole request, body included, must arrive within this of the same start, else 408 "
          "and a close (Go's ReadTimeout; 0: no limit)");
ABSL_FLAG(absl::Duration, idle_timeout, absl::Seconds(60),
          "a keep-alive connection waits this long for the next request, then closes (Go's "
          "IdleTimeout; 0: forever)");
ABSL_FLAG(std::uint64_t, max_body, 1 << 20,
          "largest request body read (and discarded); larger gets 413 and a close");
ABSL_FLAG(std::size_t, max_conns, 10000,
          "connections served at once; past it 503 and a close (lowered to fit the fd limit; 0: "
          "as many as it allows)");
ABSL_FLAG(absl::Duration, write_timeout, absl::FromChrono(examples::WriteBounds::kDefaultTimeout),
          "a client that accepts no bytes of a response for this long is closed (Go's "
          "WriteTimeout, nginx's send_timeout; 0: no limit)");
// A smaller output budget than write_bounds.hpp's default: a /metrics response (about 7 KB) is
// then written before the next request is parsed, so a client that never reads pins one response
// rather than three (the figure per such client is in the commit that set it).
constexpr std::size_t kDefaultOutputBudget = 4096;
ABSL_FLAG(std::size_t, output_budget, kDefaultOutputBudget,
          "bytes of responses waiting to be written after which a pipelining client is not read "
          "further until they are written");
ABSL_FLAG(std::size_t, output_limit, examples::WriteBounds::kDefaultHard,
          "bytes of responses waiting to be written past which the client is closed (0: none)");

namespace {

using http_example::Request;
using http_example::RequestParser;
using http_example::Route;

// What a connection may take, from the flags.
struct Limits {
  std::chrono::nanoseconds header_timeout, read_timeout, idle_timeout, write_timeout;
  std::uint64_t max_body;
  std::size_t output_budget, output_limit;
  std::string timed_out;  // the 408's body
};

// A connection's state, owned by its fiber.
struct Conn {
  explicit Conn(const Limits& l)
      : limits(l),
        timeouts(l.idle_timeout, shorter(l.header_timeout, l.read_timeout)),
        writes(l.write_timeout, l.output_budget, l.output_limit),
        parser(l.max_body) {}
  // The head's bound: the shorter of the two, either of which may be 0 (none).
  static std::chrono::nanoseconds shorter(std::chrono::nanoseconds a, std::chrono::nanoseconds b) {
    if (a <= std::chrono::nanoseconds::zero()) return b;
    if (b <= std::chrono::nanoseconds::zero()) return a;
    return std::min(a, b);
  }
  const Limits& limits;
  examples::ReadTimeouts timeouts;
  examples::WriteBounds writes;
  RequestParser parser;
  std::string in;   // bytes read and not yet parsed: a partial line, or requests held back
  std::string out;  // responses to write
};

// out's capacity kept between writes; a larger one (a /metrics response) is given back.
constexpr std::size_t kKeptOut = 16 * 1024;

// A response to HEAD carries the headers a GET would, Content-Length included, and no body
// (RFC 9110 9.3.2): a body there would be read as the start of the next response on a
// keep-alive connection.
std::string response(int code, std::string_view reason, std::string_view content_type,
                     std::string_view body, bool keep_alive, bool head = false) {
  return absl::StrCat("HTTP/1.1 ", code, " ", absl::string_view(reason.data(), reason.size()),
                      "\r\nServer: weft\r\nContent-Type: ",
                      absl::string_view(content_type.data(), content_type.size()),
                      "\r\nContent-Length: ", body.size(),
                      keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n",
                      head ? absl::string_view() : absl::string_view(body.data(), body.size()));
}

// The hello route's responses never change: built once (GET and HEAD, keep-alive or not), so
// serving one is an append, as a server caches a static file's headers.
const std::string& hello_response(bool keep_alive, bool head) {
  static const std::string r[2][2] = {
      {response(200, "OK", "text/plain", "Hello, World!", false, false),
       response(200, "OK", "text/plain", "Hello, World!", false, true)},
      {response(200, "OK", "text/plain", "Hello, World!", true, false),
       response(200, "OK", "text/plain", "Hello, World!", true, true)}};
  return r[keep_alive][head];
}

std::string stats_json() {
  const weft::Stats s = weft::stats();
  return absl::StrCat("{\"fibers_alive\":", s.fibers_alive,
                      ",\"fibers_spawned\":", s.fibers_spawned, ",\"switches\":", s.switches,
                      ",\"parks\":", s.parks, ",\"steals\":", s.steals, ",\"workers\":", s.workers,
                      ",\"stacks_in_use\":", s.stacks_in_use, "}\n");
}

// Appends the response to a complete request.
void respond(const Request& r, std::string& out) {
  switch (r.route) {
    case Route::kHello:
      out += hello_response(r.keep_alive, r.head);
      return;
    case Route::kStats:
      out += response(200, "OK", "application/json", stats_json(), r.keep_alive, r.head);
      return;
    case Route::kMetrics: {
      std::ostringstream metrics;
      weft::write_metrics(metrics);
      out += response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics.str(),
                      r.keep_alive, r.head);
      return;
    }
    case Route::kNotFound:
      out += response(404, "Not Found", "text/plain", "not found\n", r.keep_alive, r.head);
      return;
    case Route::kMethodNotAllowed:
      out +=
          response(405, "Method Not Allowed", "text/plain", "method not allowed\n", r.keep_alive);
      return;
  }
}

// Parses the requests in [at, end) and appends their responses to c.out, until the bytes are
// used up or wait for more (false), the output budget is reached (false, `at` short of `end`), or
// the connection is to close after c.out: a "Connection: close" request, an Upgrade, a rejected
// request (true).
bool parse(Conn& c, const char*& at, const char* end) {
  for (;;) {
    if (at != end && !c.timeouts.in_request()) c.timeouts.request_begun();  // due from now
    switch (c.parser.next(at, end)) {
      case RequestParser::kRequest: {
        c.timeouts.request_done();
        const Request& r = c.parser.request();
        respond(r, c.out);
        if (!r.keep_alive) return true;  // nothing after it is served
        if (c.writes.flush_now(c.out.size())) return false;
        continue;
      }
      case RequestParser::kNeedMore:
        // The head is in: the rest of the request is due within --read_timeout of its start.
        if (c.parser.head_done()) c.timeouts.allow(c.limits.read_timeout);
        return false;
      case RequestParser::kRejected: {
        const http_example::Rejection& j = c.parser.rejection();
        c.out += response(j.status, j.reason, "text/plain", absl::StrCat(j.detail, "\n"), false);
        return true;
      }
    }
  }
}

// One connection, plain or TLS: the same blocking-style loop over either stream. After a
// "Connection: close" response, a rejection, a 408 or 413, the connection ends with
// linger_close: the write side closes (TLS: close_notify first), so the client reads the whole
// response and then end of stream, and input still arriving is discarded rather than answered
// with a reset. Every write goes through c.writes (the write timeout).
template <class Stream>
void serve(Stream& s, const Limits& limits) {
  Conn c(limits);
  const auto close_after = [&](std::string_view last) {
    if (!last.empty() && !c.writes.write_all(s, last).ok()) return;
    c.writes.arm(s);  // bounds a TLS close_notify too
    examples::linger_close(s);
  };
  // The first request's head is due within --header_timeout of the connection's start.
  c.timeouts.request_begun();
  char buf[2048];
  bool held = false;  // c.in holds requests held back by the output budget: parse before reading
  for (;;) {
    const char* at;
    const char* end;
    if (held) {
      at = c.in.data();
      end = at + c.in.size();
    } else {
      c.timeouts.arm(s);
      absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);
      if (!n.ok() && n.status().code() == absl::StatusCode::kDeadlineExceeded) {
        if (!c.timeouts.expired(s)) continue;  // an earlier deadline: read on
        // A request that began and did not arrive in time is told so; a connection that sent
        // nothing (idle, or new) is closed quietly, as Go and nginx do.
        if (c.parser.in_request()) {
          close_after(response(408, "Request Timeout", "text/plain", limits.timed_out, false));
        }
        return;
      }
      if (!n.ok() || *n == 0) return;
      if (c.in.empty()) {  // the common case: parsed where it was read
        at = buf;
        end = buf + *n;
      } else {
        c.in.append(buf, *n);
        at = c.in.data();
        end = at + c.in.size();
      }
    }
    const char* const begin = at;
    const bool closing = parse(c, at, end);
    if (c.writes.over_hard(c.out.size())) return;  // never written: the client is not reading
    if (closing) return close_after(c.out);
    held = at != end && c.writes.flush_now(c.out.size());
    if (begin == buf) {
      if (at != end) c.in.assign(at, end);  // else c.in is empty already
    } else {
      c.in.erase(0, static_cast<std::size_t>(at - begin));
    }
    if (!c.out.empty()) {
      if (!c.writes.write_all(s, c.out).ok()) return;  // a write timeout, or the client is gone
      c.out.clear();
      if (c.out.capacity() > kKeptOut) std::string().swap(c.out);
    }
    // Answered: the next request's first byte is due within --idle_timeout, unless it has begun.
    if (!c.timeouts.in_request()) c.timeouts.wait_for_request();
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("HTTP/1.1 hello-world server on weft");
  examples::accept_dashed_flags(argc, argv);  // --tls-cert as well as --tls_cert
  absl::ParseCommandLine(argc, argv);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key);
  if (cert.empty() != key.empty()) {
    std::fprintf(stderr, "http_server: --tls-cert and --tls-key go together (HTTPS needs both)\n");
    return 2;
  }
  std::optional<weft::tls::ServerContext> tls;
  if (!cert.empty()) {
    weft::tls::ServerConfig cfg;
    cfg.certificates = {{cert, key}};
    cfg.alpn = {"http/1.1"};
    cfg.handshake_timeout = absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_tls_handshake_timeout));
    absl::StatusOr<weft::tls::ServerContext> ctx = weft::tls::ServerContext::create(cfg);
    if (!ctx.ok()) {
      std::fprintf(stderr, "http_server: %s\n", std::string(ctx.status().ToString()).c_str());
      return 1;
    }
    tls = std::move(*ctx);
  }
  Limits limits{.header_timeout = absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_header_timeout)),
                .read_timeout = absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_read_timeout)),
                .idle_timeout = absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_idle_timeout)),
                .write_timeout = absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_write_timeout)),
                .max_body = absl::GetFlag(FLAGS_max_body),
                .output_budget = absl::GetFlag(FLAGS_output_budget),
                .output_limit = absl::GetFlag(FLAGS_output_limit),
                .timed_out = {}};
  const auto within = [](absl::Duration d) {
    return d > absl::ZeroDuration() ? "within " + absl::FormatDuration(d) : "without a limit";
  };
  limits.timed_out = absl::StrCat(
      "request timeout: a request head must arrive ", within(absl::GetFlag(FLAGS_header_timeout)),
      " and a whole request ", within(absl::GetFlag(FLAGS_read_timeout)), "\n");
  examples::ShutdownSignal signals;
  int rc = 0;
  weft::run(
      [&] {
        std::optional<weft::net::TcpListener> l =
            examples::listen_announced("http_server", absl::GetFlag(FLAGS_listen));
        if (!l) {
          rc = 1;
          return;
        }
        weft::net::Server server(std::move(*l));
        examples::ConnectionCap cap("http_server", "--max_conns", absl::GetFlag(FLAGS_max_conns));
        const std::string busy =
            response(503, "Service Unavailable", "text/plain",
                     absl::StrCat("server busy: it serves ", cap.limit(),
                                  " connections at most and has that many; try again later\n"),
                     false);
        // Joined before `server` goes away: serve() returns once drain() stopped accepting.
        weft::Task<absl::Status> serving = weft::spawn([&] {
          return server.serve([&](weft::net::TcpStream& s, const weft::Context&) {
            std::optional<examples::ConnectionCap::Slot> slot = cap.try_admit();
            if (!tls) return slot ? serve(s, limits) : examples::refuse(s, busy);
            // The handshake runs here, in the connection's fiber, bounded by its timeout (for a
            // refusal, by kRefusalTime as well); the TLS stream keeps the connection's context,
            // so drain() cancels it as it does TCP.
            if (!slot) s.set_deadline(std::chrono::steady_clock::now() + examples::kRefusalTime);
            absl::StatusOr<weft::tls::TlsStream> t = weft::tls::accept(std::move(s), *tls);
            if (!t.ok()) return;
            if (slot) {
              serve(*t, limits);
            } else {
              examples::refuse(*t, busy);
            }
          });
        });
        const int sig = signals.wait();
        std::printf("http_server: signal %d, shutting down\n", sig);
        // In-flight requests finish; keep-alive connections idle past the grace are cancelled.
        const absl::Status drained =
            server.drain(absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_drain_grace)));
        std::printf("http_server: drained: %s\n", std::string(drained.ToString()).c_str());
        if (absl::Status s = serving.join(); !s.ok()) {
          std::fprintf(stderr, "http_server: accepting failed: %s\n",
                       std::string(s.ToString()).c_str());
          rc = 1;
        }
      },
      weft::Options{.workers = static_cast<unsigned>(std::max(0, absl::GetFlag(FLAGS_workers)))});
  return rc;
}
