// http_server: HTTP/1.1 with keep-alive (and pipelining) in blocking style, one fiber per
// connection. Requests are parsed by Node's http_parser (Debian's libhttp-parser-dev), fed with
// whatever each read() returns; every complete request gets a response, in order.
//
//   http_server --listen=127.0.0.1:8080 [--workers=N] [--drain_grace=1s]
//               [--tls-cert=FILE --tls-key=FILE]   (HTTPS: TLS 1.2/1.3, ALPN http/1.1)
//
//   GET /        -> "Hello, World!"   (HEAD: the same headers, no body)
//   GET /stats   -> weft::stats() as JSON
//   other paths  -> 404
// Malformed requests get "400 Bad Request" and the connection is closed; a request head larger
// than http_parser's limit (80 KiB) is malformed. Prints "listening on HOST:PORT" once ready;
// SIGINT/SIGTERM drain it (weft::net::Server): it stops accepting, lets requests in flight finish
// for up to --drain_grace, then cancels the connections left (idle keep-alives) and exits.
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_cat.h>
#include <absl/time/time.h>
#include <http_parser.h>

#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

#include "common/dashed_flags.hpp"
#include "common/listen_announced.hpp"
#include "common/shutdown_signal.hpp"

ABSL_FLAG(std::string, listen, "127.0.0.1:8080", "address to listen on, HOST:PORT");
ABSL_FLAG(int, workers, 0, "weft workers (0: all CPUs)");
ABSL_FLAG(absl::Duration, drain_grace, absl::Seconds(1),
          "on SIGINT/SIGTERM, how long connections may finish before they are cancelled");
ABSL_FLAG(std::string, tls_cert, "",
          "serve HTTPS with this certificate chain (PEM); needs --tls-key");
ABSL_FLAG(std::string, tls_key, "", "the private key (PEM) of --tls-cert");
ABSL_FLAG(absl::Duration, tls_handshake_timeout, absl::Seconds(10),
          "HTTPS: a client that has not finished its TLS handshake by then is dropped");

namespace {

constexpr std::size_t kMaxUrl = 8192;

struct Conn {
  http_parser parser;
  std::string url;  // of the request being parsed
  std::string out;  // responses to write after this read's requests
  bool close_after = false;
};

// A response to HEAD carries the headers a GET would, Content-Length included, and no body
// (RFC 9110 9.3.2): a body there would be read as the start of the next response on a
// keep-alive connection.
std::string response(int code, const char* reason, std::string_view content_type,
                     std::string_view body, bool keep_alive, bool head = false) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nServer: weft\r\nContent-Type: ",
                      absl::string_view(content_type.data(), content_type.size()),
                      "\r\nContent-Length: ", body.size(),
                      keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n",
                      head ? absl::string_view() : absl::string_view(body.data(), body.size()));
}

std::string stats_json() {
  const weft::Stats s = weft::stats();
  return absl::StrCat("{\"fibers_alive\":", s.fibers_alive,
                      ",\"fibers_spawned\":", s.fibers_spawned, ",\"switches\":", s.switches,
                      ",\"parks\":", s.parks, ",\"steals\":", s.steals, ",\"workers\":", s.workers,
                      ",\"stacks_in_use\":", s.stacks_in_use, "}\n");
}

int on_url(http_parser* p, const char* at, std::size_t len) {
  auto* c = static_cast<Conn*>(p->data);
  if (c->url.size() + len > kMaxUrl) return 1;  // error: URI too long
  c->url.append(at, len);
  return 0;
}

int on_message_complete(http_parser* p) {
  auto* c = static_cast<Conn*>(p->data);
  const bool keep_alive = http_should_keep_alive(p) != 0;
  const std::string_view path = std::string_view(c->url).substr(0, c->url.find('?'));
  const bool head = p->method == HTTP_HEAD;
  if (p->method != HTTP_GET && !head) {
    c->out += response(405, "Method Not Allowed", "text/plain", "method not allowed\n", keep_alive);
  } else if (path == "/") {
    c->out += response(200, "OK", "text/plain", "Hello, World!", keep_alive, head);
  } else if (path == "/stats") {
    c->out += response(200, "OK", "application/json", stats_json(), keep_alive, head);
  } else {
    c->out += response(404, "Not Found", "text/plain", "not found\n", keep_alive, head);
  }
  c->url.clear();
  if (!keep_alive) {
    c->close_after = true;
    return 1;  // stop parsing: nothing after a "Connection: close" request is served
  }
  return 0;
}

const http_parser_settings kSettings = [] {
  http_parser_settings s;
  http_parser_settings_init(&s);
  s.on_url = on_url;
  s.on_message_complete = on_message_complete;
  return s;
}();

// The end of a connection after a "Connection: close" response or a 400: the write side closes
// (TLS: close_notify first), so the client reads the whole response and then end of stream.
void end_writes(weft::net::TcpStream& s) { (void)s.shutdown_write(); }
void end_writes(weft::tls::TlsStream& s) { (void)s.shutdown(); }

// One connection, plain or TLS: the same blocking-style loop over either stream.
template <class Stream>
void serve(Stream& s) {
  Conn c;
  http_parser_init(&c.parser, HTTP_REQUEST);
  c.parser.data = &c;
  char buf[2048];
  for (;;) {
    absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);
    if (!n.ok() || *n == 0) return;
    const std::size_t parsed = http_parser_execute(&c.parser, &kSettings, buf, *n);
    const auto err = static_cast<http_errno>(c.parser.http_errno);
    if (!c.close_after && (err != HPE_OK || parsed != *n || c.parser.upgrade)) {
      c.out += response(400, "Bad Request", "text/plain",
                        absl::StrCat("bad request: ", http_errno_description(err), "\n"), false);
      c.close_after = true;
    }
    if (!c.out.empty()) {
      if (!s.write_all(c.out).ok()) return;
      c.out.clear();
    }
    if (c.close_after) {
      end_writes(s);
      return;
    }
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
        // Joined before `server` goes away: serve() returns once drain() stopped accepting.
        weft::Task<absl::Status> serving = weft::spawn([&] {
          return server.serve([&tls](weft::net::TcpStream& s, const weft::Context&) {
            if (!tls) return serve(s);
            // The handshake runs here, in the connection's fiber, bounded by its timeout; the
            // TLS stream keeps the connection's context, so drain() cancels it as it does TCP.
            absl::StatusOr<weft::tls::TlsStream> t = weft::tls::accept(std::move(s), *tls);
            if (t.ok()) serve(*t);
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
