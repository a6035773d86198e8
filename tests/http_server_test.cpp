// examples/http_server as a black box, in a process of its own: GET / answers "Hello, World!";
// HEAD answers the same headers (Content-Length included) and no body, so the next response on a
// keep-alive connection starts right after HEAD's headers (a body there was read by curl as
// "Excess found" and broke the framing); a pipelined HEAD + GET + HEAD gets three responses in
// order; an unknown path is 404 and HEAD of it has no body either; a method other than GET/HEAD
// is 405. GET /metrics answers Prometheus text (Content-Type text/plain; version=0.0.4) that the
// strict parser of prom_text.hpp accepts, and promtool too where it is installed. HTTPS: curl
// fetches over TLS; the connection cap and the header timeout hold over TLS as well (the other
// hostile-client tests are tests/hardening_test.cpp). Strict framing (issue 39): each malformed
// request of the issue (whitespace before a colon, chunk data not ended by CRLF, a missing or
// second Host, an HTTP version other than 1.0/1.1, a 100 KB URI, TE obfuscations) gets exactly one
// response with its status and then the close; Upgrade and CONNECT get one response and the
// close, never a second "400". Clients that pipeline and never read are closed by the write
// timeout, plain and TLS, while another client is served (tests/http_framing_diff.py compares
// the framing with nginx's).
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <weft/weft.hpp>

#include "child_server.hpp"
#include "net_test_util.hpp"
#include "prom_text.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;

// Sends `request` on one connection and reads until `responses` responses have fully arrived
// (each one's headers, then Content-Length bytes of body unless it answers a HEAD, as said by
// `heads`), or the peer closes. Returns everything read.
std::string exchange(const std::string& addr, const std::string& request,
                     const std::vector<bool>& heads) {
  std::string got;
  weft::run(
      [&] {
        absl::StatusOr<weft::net::TcpStream> c =
            weft::net::dial_tcp(addr, std::chrono::seconds(10));
        ASSERT_TRUE(c.ok()) << c.status();
        c->set_read_deadline(Clock::now() + std::chrono::seconds(kSanitized ? 60 : 20));
        ASSERT_TRUE(c->write_all(request).ok());
        std::size_t at = 0;
        for (const bool head : heads) {
          for (;;) {
            const std::size_t end = got.find("\r\n\r\n", at);
            if (end != std::string::npos) {
              std::size_t body = 0;
              const std::size_t cl = got.find("Content-Length: ", at);
              if (cl != std::string::npos && cl < end) body = std::stoul(got.substr(cl + 16));
              const std::size_t need = end + 4 + (head ? 0 : body);
              if (got.size() >= need) {
                at = need;
                break;
              }
            }
            char buf[4096];
            absl::StatusOr<std::size_t> n = c->read(buf, sizeof buf);
            if (!n.ok() || *n == 0) return;
            got.append(buf, *n);
          }
        }
      },
      with_workers(1));
  return got;
}

class HttpServerTest : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(server_.start(), ""); }
  ChildServer server_{WEFT_HTTP_SERVER};
};

TEST_F(HttpServerTest, GetAnswersHelloWorld) {
  const std::string r = exchange(server_.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n", {false});
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Length: 13\r\n"), std::string::npos) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\nHello, World!")) << r;
}

TEST_F(HttpServerTest, HeadHasTheHeadersAndNoBodySoKeepAliveFramingHolds) {
  const std::string r = exchange(server_.addr(),
                                 "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"
                                 "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
                                 "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n",
                                 {true, false, true});
  // HEAD's headers, then at once the GET's response, then the 404's headers and nothing after.
  const std::size_t first_end = r.find("\r\n\r\n");
  ASSERT_NE(first_end, std::string::npos) << r;
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.substr(0, first_end).find("Content-Length: 13"), std::string::npos)
      << "HEAD reports the length a GET would have: " << r;
  EXPECT_EQ(r.compare(first_end + 4, 17, "HTTP/1.1 200 OK\r\n"), 0)
      << "the next response must start right after HEAD's headers: " << r;
  const std::size_t hello = r.find("Hello, World!");
  ASSERT_NE(hello, std::string::npos) << r;
  EXPECT_EQ(count_occurrences(r, "Hello, World!"), 1u) << r;
  EXPECT_EQ(r.compare(hello + 13, 24, "HTTP/1.1 404 Not Found\r\n"), 0) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\n")) << "HEAD of a 404 has no body either: " << r;
}

TEST_F(HttpServerTest, OtherMethodsAre405) {
  const std::string r = exchange(
      server_.addr(), "DELETE / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", {false});
  EXPECT_EQ(r.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << r;
}

TEST_F(HttpServerTest, MetricsArePrometheusText) {
  // A request first, so that the server has parked and switched.
  (void)exchange(server_.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n", {false});
  const std::string r =
      exchange(server_.addr(), "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n", {false});
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            std::string::npos)
      << r;
  const std::size_t head_end = r.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << r;
  const std::string body = r.substr(head_end + 4);
  EXPECT_NE(r.substr(0, head_end).find("Content-Length: " + std::to_string(body.size())),
            std::string::npos)
      << r;
  const weft_test::prom::Exposition e = weft_test::prom::parse(body);
  ASSERT_EQ(e.error, "") << body;
  EXPECT_EQ(e.value("weft_workers"), 1.0) << body;  // ChildServer runs it with --workers=1
  EXPECT_GT(e.value("weft_parks_total"), 0.0) << body;
  ASSERT_NE(e.family("weft_run_queue_length"), nullptr) << body;
  EXPECT_EQ(e.family("weft_run_queue_length")->samples.size(), 1u) << body;
  EXPECT_NE(e.family("weft_park_duration_seconds"), nullptr) << body;
  if (const auto checked = weft_test::prom::promtool_check(body)) {
    EXPECT_EQ(checked->status, 0) << checked->output << "\n" << body;
  }
}

// Sends `request`, half-closes, and reads everything until the server closes (or kIoBound).
std::string exchange_to_close(const std::string& addr, const std::string& request) {
  std::string got;
  weft::run(
      [&] {
        weft::net::TcpStream c = must(weft::net::dial_tcp(addr, kIoBound), "dial");
        c.set_deadline(in(kIoBound));
        (void)c.write_all(request);  // the server may close before it has read it all
        (void)c.shutdown_write();
        char buf[4096];
        for (;;) {
          absl::StatusOr<std::size_t> n = c.read(buf, sizeof buf);
          if (!n.ok() || *n == 0) return;
          got.append(buf, *n);
        }
      },
      with_workers(1));
  return got;
}

struct FramingCase {
  const char* name;
  std::string request;
  const char* status_line;  // of the one response
};

void PrintTo(const FramingCase& c, std::ostream* os) { *os << c.name; }

class HttpFramingTest : public testing::TestWithParam<FramingCase> {};

// One response, the expected one, with "Connection: close", and then the end of the stream.
TEST_P(HttpFramingTest, OneResponseThenClose) {
  ChildServer server{WEFT_HTTP_SERVER};
  ASSERT_EQ(server.start(), "");
  const std::string r = exchange_to_close(server.addr(), GetParam().request);
  EXPECT_EQ(r.rfind(GetParam().status_line, 0), 0u) << r;
  EXPECT_EQ(count_occurrences(r, "\r\nServer: weft\r\n"), 1u) << "exactly one response: " << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos) << r;
  // Still serving.
  const std::string ok = exchange_to_close(server.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
}

const std::string kGet = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const std::string kPost = "POST / HTTP/1.1\r\nHost: t\r\n";

INSTANTIATE_TEST_SUITE_P(
    Issue39, HttpFramingTest,
    testing::Values(
        FramingCase{"SpaceBeforeColonTE",
                    kPost + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + kGet,
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"SpaceBeforeColonCL", kPost + "Content-Length : 5\r\n\r\nhello" + kGet,
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"ChunkDataWithoutCRLF",
                    kPost + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n" + kGet,
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"MissingHost", "GET / HTTP/1.1\r\n\r\n" + kGet, "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"DuplicateHost", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" + kGet,
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"Http20", "GET / HTTP/2.0\r\nHost: t\r\n\r\n",
                    "HTTP/1.1 505 HTTP Version Not Supported\r\n"},
        FramingCase{"Http99", "GET / HTTP/9.9\r\nHost: t\r\n\r\n",
                    "HTTP/1.1 505 HTTP Version Not Supported\r\n"},
        FramingCase{"LongUri", "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n",
                    "HTTP/1.1 414 URI Too Long\r\n"},
        FramingCase{"TEXchunked", kPost + "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"TEChunkedIdentity",
                    kPost + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"CLAndTE",
                    kPost + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                    "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"BareLF", "GET / HTTP/1.1\nHost: t\n\n", "HTTP/1.1 400 Bad Request\r\n"},
        FramingCase{"ObsFold", "GET / HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n",
                    "HTTP/1.1 400 Bad Request\r\n"},
        // An Upgrade is ignored (RFC 9110 7.8): one 200, then the close, whatever follows.
        FramingCase{
            "UpgradeWebsocket",
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" +
                kGet,
            "HTTP/1.1 200 OK\r\n"},
        FramingCase{"UpgradeH2c",
                    "GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                    "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n" +
                        kGet,
                    "HTTP/1.1 200 OK\r\n"},
        FramingCase{"Connect", "CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n\r\n" + kGet,
                    "HTTP/1.1 405 Method Not Allowed\r\n"}),
    [](const testing::TestParamInfo<FramingCase>& i) { return std::string(i.param.name); });

// --write_timeout: clients that pipeline GET /metrics and never read are closed by the server
// (its fd count comes back down while they still hold their sockets), and a normal client is
// served meanwhile. `Dial` makes a client stream (TCP or TLS).
template <class Dial>
void never_reading_clients_are_closed(ChildServer& server, Dial dial) {
  const long base_fds = server.open_fds();
  constexpr int kClients = 20;
  std::string pipeline;
  for (int i = 0; i < 2000; ++i) pipeline += "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";
  weft::run(
      [&] {
        std::vector<decltype(dial())> hogs;
        for (int i = 0; i < kClients; ++i) {
          hogs.push_back(dial());
          hogs.back().set_write_deadline(in(std::chrono::seconds(2)));
          (void)hogs.back().write_all(pipeline);  // may block once the server stops reading
        }
        // A normal client is served while they are held.
        auto c = dial();
        c.set_deadline(in(kIoBound));
        must_ok(c.write_all("GET / HTTP/1.1\r\nHost: t\r\n\r\n"), "write");
        std::string got;
        char buf[4096];
        while (!got.ends_with("Hello, World!"))
          got.append(buf, must(c.read(buf, sizeof buf), "read"));
        // The server closes every hog: its fd count comes back to its base (+1: `c`).
        const auto give_up = Clock::now() + kIoBound;
        while (server.open_fds() > base_fds + 1 && Clock::now() < give_up) {
          weft::this_fiber::sleep_for(std::chrono::milliseconds(50));
        }
        EXPECT_LE(server.open_fds(), base_fds + 1) << "never-reading clients still held";
        // The normal client is still served.
        must_ok(c.write_all("GET / HTTP/1.1\r\nHost: t\r\n\r\n"), "write");
        got.clear();
        while (!got.ends_with("Hello, World!"))
          got.append(buf, must(c.read(buf, sizeof buf), "read"));
      },
      with_workers(1));
}

TEST(HttpServerWriteTimeout, NeverReadingClientsAreClosedWhileOthersAreServed) {
  ChildServer server{WEFT_HTTP_SERVER};
  ASSERT_EQ(server.start("--write_timeout=1s"), "");
  never_reading_clients_are_closed(
      server, [&] { return must(weft::net::dial_tcp(server.addr(), kIoBound), "dial"); });
}

// HTTPS: http_server --tls-cert=FILE --tls-key=FILE, fetched with curl --cacert (a real client,
// which checks the certificate against the CA and the name). The certificate is made here with
// openssl req; an ECDSA key keeps it fast under the sanitizers.
std::string shell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// A fresh directory with cert.pem and key.pem for localhost and 127.0.0.1; *status is openssl's.
std::string make_certificate(int* status, std::string* out) {
  char tmpl[] = "/tmp/weft-https-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  *out = shell("cd " + dir +
                   " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                   "-keyout key.pem -out cert.pem -days 30 -subj /CN=localhost "
                   "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>&1",
               status);
  return dir;
}

TEST(HttpsServerTest, CurlFetchesOverTlsAndAPlainClientIsRefused) {
  int st = -1;
  std::string made;
  const std::string dir = make_certificate(&st, &made);
  ASSERT_EQ(st, 0) << made;
  ChildServer server{WEFT_HTTP_SERVER};
  ASSERT_EQ(server.start({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem"}), "");
  const std::string port = server.addr().substr(server.addr().rfind(':') + 1);
  // Two requests on one connection (keep-alive over TLS), then HEAD.
  const std::string curl = "curl -sS --max-time 20 --cacert " + dir +
                           "/cert.pem --resolve localhost:" + port + ":127.0.0.1 ";
  const std::string url = "https://localhost:" + port + "/";
  std::string out = shell(curl + url + " " + url + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(out, "Hello, World!Hello, World!");
  out = shell(curl + "-I " + url + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK", 0), 0u) << out;
  // curl without the CA refuses the server; plain HTTP on the TLS port gets no HTTP answer.
  out = shell("curl -sS --max-time 20 --resolve localhost:" + port + ":127.0.0.1 " + url + " 2>&1",
              &st);
  EXPECT_EQ(st, 60) << "curl's 'peer certificate cannot be authenticated': " << out;
  out = shell("curl -sS --max-time 20 http://127.0.0.1:" + port + "/ 2>&1", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_EQ(out.find("Hello, World!"), std::string::npos) << out;
  // The server is still serving after both.
  out = shell(curl + url + " 2>&1", &st);
  EXPECT_EQ(out, "Hello, World!");
  int exit_status = -1;
  server.terminate(&exit_status);
  EXPECT_EQ(exit_status, 0);
  std::filesystem::remove_all(dir);
}

// The hostile-client bounds hold over TLS too: past --max_conns a TLS client gets its 503 over
// TLS; once a slot is free, a request head that does not arrive within --header_timeout of the
// handshake gets 408, and then a clean end (close_notify).
TEST(HttpsServerTest, ConnectionCapAndHeaderTimeoutApplyOverTls) {
  int st = -1;
  std::string made;
  const std::string dir = make_certificate(&st, &made);
  ASSERT_EQ(st, 0) << made;
  ChildServer server{WEFT_HTTP_SERVER};
  ASSERT_EQ(server.start({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem",
                          "--max_conns=1", "--header_timeout=1s"}),
            "");
  weft::run(
      [&] {
        weft::tls::ClientConfig cfg;
        cfg.ca_file = dir + "/cert.pem";
        const weft::tls::ClientContext ctx = must(weft::tls::ClientContext::create(cfg), "ctx");
        // Reads until the stream ends (close_notify: 0) or fails.
        const auto read_all = [](weft::tls::TlsStream& c, bool* clean) {
          c.set_read_deadline(in(kIoBound));
          std::string got;
          char buf[4096];
          for (;;) {
            absl::StatusOr<std::size_t> n = c.read(buf, sizeof buf);
            if (!n.ok() || *n == 0) {
              *clean = n.ok();
              return got;
            }
            got.append(buf, *n);
          }
        };
        weft::tls::TlsStream held = must(weft::tls::dial(server.addr(), ctx), "dial");
        held.set_deadline(in(kIoBound));
        must_ok(held.write_all("GET / HTTP/1.1\r\nHost: t\r\n\r\n"), "write");
        std::string got;
        char buf[4096];
        while (!got.ends_with("Hello, World!")) {
          got.append(buf, must(held.read(buf, sizeof buf), "read"));
        }
        weft::tls::TlsStream refused = must(weft::tls::dial(server.addr(), ctx), "dial");
        bool clean = false;
        const std::string r = read_all(refused, &clean);
        EXPECT_EQ(r.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << r;
        EXPECT_TRUE(clean) << "a refusal over TLS ends with close_notify";
        held.close();  // the slot frees once the server has seen it go
        std::string slow_got;
        const auto give_up = Clock::now() + kIoBound;
        do {
          weft::this_fiber::sleep_for(std::chrono::milliseconds(20));
          const auto t0 = Clock::now();  // before the dial: the server's bound starts later
          weft::tls::TlsStream slow = must(weft::tls::dial(server.addr(), ctx), "dial");
          must_ok(slow.write_all("GET / HTTP/1.1\r\nHo"), "write");
          slow_got = read_all(slow, &clean);
          if (slow_got.find(" 503 ") == std::string::npos) {
            EXPECT_GE(Clock::now() - t0, std::chrono::seconds(1)) << "408 before the timeout";
          }
        } while (slow_got.find(" 503 ") != std::string::npos && Clock::now() < give_up);
        EXPECT_EQ(slow_got.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << slow_got;
        EXPECT_TRUE(clean);
      },
      with_workers(1));
  int exit_status = -1;
  server.terminate(&exit_status);
  EXPECT_EQ(exit_status, 0);
  std::filesystem::remove_all(dir);
}

TEST(HttpsServerTest, NeverReadingClientsAreClosedByTheWriteTimeout) {
  int st = -1;
  std::string made;
  const std::string dir = make_certificate(&st, &made);
  ASSERT_EQ(st, 0) << made;
  ChildServer server{WEFT_HTTP_SERVER};
  ASSERT_EQ(server.start({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem",
                          "--write_timeout=1s"}),
            "");
  weft::tls::ClientConfig cfg;
  cfg.ca_file = dir + "/cert.pem";
  std::optional<weft::tls::ClientContext> ctx;
  weft::run([&] { ctx.emplace(must(weft::tls::ClientContext::create(cfg), "ctx")); },
            with_workers(1));
  never_reading_clients_are_closed(
      server, [&] { return must(weft::tls::dial(server.addr(), *ctx), "dial"); });
  std::filesystem::remove_all(dir);
}

}  // namespace
