// weft::tls: handshakes and records over fibers, against itself and against Debian's real peers
// (openssl s_client / s_server, curl in http_server_test). Certificates are made once per run
// with `openssl req` / `openssl x509` in a temporary folder: a CA, a server certificate for
// localhost and 127.0.0.1, one for another host, an expired one, a self-signed one, and a client
// certificate. Every wait is bounded (the streams' deadlines, kIoBound), so a bug fails a test
// instead of hanging it; nothing asserts on how long something took beyond such bounds.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>
#include <weft/tls.hpp>
#include <weft/weft.hpp>

#include "net_test_util.hpp"

namespace {

using namespace weft_net_test;
namespace tls = weft::tls;
using weft_test::WorkersTest;

struct Certs {
  std::string dir;
  std::string path(const char* f) const { return dir + "/" + f; }
};

// The shell's exit status and its standard output (stderr joined in with 2>&1 by the caller).
struct ToolResult {
  int status = -1;
  std::string out;
};

ToolResult run_tool(const std::string& cmd) {
  ToolResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const Certs& certs() {
  static const Certs c = [] {
    Certs made;
    char tmpl[] = "/tmp/weft-tls-test-XXXXXX";
    made.dir = ::mkdtemp(tmpl);
    const std::string d = made.dir;
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    auto sh = [&](const std::string& cmd) {
      ToolResult r = run_tool("cd " + d + " && " + cmd + " 2>&1");
      if (r.status != 0)
        throw std::runtime_error("making test certificates: " + cmd + ": " + r.out);
    };
    sh("openssl req -x509" + ec + "-keyout ca.key -out ca.pem -days 30 -subj /CN=weft-test-ca");
    // signed(name, days, san, subject): a key and a CA-signed certificate.
    auto signed_cert = [&](const std::string& name, int days, const std::string& san,
                           const std::string& cn) {
      sh("openssl req" + ec + "-keyout " + name + ".key -out " + name + ".csr -subj /CN=" + cn);
      sh("printf 'subjectAltName=" + san + "\\n' > " + name + ".ext");
      sh("openssl x509 -req -in " + name + ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out " +
         name + ".pem -days " + std::to_string(days) + " -extfile " + name + ".ext");
    };
    signed_cert("server", 30, "DNS:localhost,IP:127.0.0.1", "localhost");
    signed_cert("other", 30, "DNS:other.example", "other.example");
    signed_cert("expired", -1, "DNS:localhost,IP:127.0.0.1", "localhost");
    signed_cert("client", 30, "DNS:weft-client", "weft-client");
    sh("openssl req -x509" + ec +
       "-keyout self.key -out self.pem -days 30 -subj /CN=localhost "
       "-addext subjectAltName=DNS:localhost,IP:127.0.0.1");
    return made;
  }();
  return c;
}

tls::ServerContext server_ctx(std::vector<std::string> alpn = {"http/1.1"},
                              std::string cert = "server") {
  tls::ServerConfig cfg;
  cfg.certificates = {
      {certs().path((cert + ".pem").c_str()), certs().path((cert + ".key").c_str())}};
  cfg.alpn = std::move(alpn);
  return must(tls::ServerContext::create(cfg), "ServerContext::create");
}

tls::ClientContext client_ctx(std::vector<std::string> alpn = {"http/1.1"}) {
  tls::ClientConfig cfg;
  cfg.ca_file = certs().path("ca.pem");
  cfg.alpn = std::move(alpn);
  return must(tls::ClientContext::create(cfg), "ClientContext::create");
}

// A TCP listener with its accept bounded.
net::TcpListener bounded_listener() {
  net::TcpListener l = must(net::listen_tcp("127.0.0.1:0"), "listen_tcp");
  l.set_deadline(in(kIoBound));
  return l;
}

// The server side of one TLS connection: accept, handshake, then `body`.
template <class Body>
weft::Task<void> serve_one(net::TcpListener& l, const tls::ServerContext& ctx, Body body) {
  return weft::spawn([&l, ctx, body]() mutable {
    net::TcpStream tcp = must(l.accept(), "accept");
    tcp.set_deadline(in(kIoBound));
    body(tls::accept(std::move(tcp), ctx));
  });
}

// Echoes until end of stream, then shuts down cleanly.
void echo(absl::StatusOr<tls::TlsStream> s) {
  tls::TlsStream st = must(std::move(s), "tls accept");
  char buf[16384];
  for (;;) {
    absl::StatusOr<std::size_t> n = st.read(buf, sizeof buf);
    if (!n.ok() || *n == 0) break;
    if (!st.write_all(buf, *n).ok()) return;
  }
  (void)st.shutdown();
}

class TlsTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(TlsTest);

TEST_P(TlsTest, EchoRoundTripsAndReportsWhatTheHandshakeAgreed) {
  weft::run(
      [] {
        net::TcpListener l = bounded_listener();
        const tls::ServerContext sctx = server_ctx({"h2", "http/1.1"});
        std::string server_alpn, server_sni;
        weft::Task<void> server = serve_one(l, sctx, [&](absl::StatusOr<tls::TlsStream> s) {
          ASSERT_TRUE(s.ok()) << s.status();
          server_alpn = s->alpn();
          server_sni = s->server_name();
          echo(std::move(s));
        });
        tls::ClientConfig cfg;
        cfg.ca_file = certs().path("ca.pem");
        cfg.alpn = {"http/1.1"};
        const tls::ClientContext cctx = must(tls::ClientContext::create(cfg), "client ctx");
        net::TcpStream tcp = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
        tcp.set_deadline(in(kIoBound));
        tls::TlsStream c = must(tls::connect(std::move(tcp), cctx, "localhost"), "connect");
        EXPECT_EQ(c.alpn(), "http/1.1");
        EXPECT_EQ(c.server_name(), "localhost");
        EXPECT_EQ(c.version(), tls::Version::kTls13);
        EXPECT_FALSE(c.cipher().empty());
        EXPECT_EQ(c.peer_subject(), "CN=localhost");
        EXPECT_FALSE(c.session_reused());
        const std::string msg = pattern(1, 100000);  // several records each way
        weft::Task<void> writer = weft::spawn([&] {
          must_ok(c.write_all(msg), "write_all");
          must_ok(c.shutdown(), "shutdown");
        });
        EXPECT_EQ(must(read_to_eof(c), "read_to_eof"), msg);
        writer.join();
        server.join();
        EXPECT_EQ(server_alpn, "http/1.1");
        EXPECT_EQ(server_sni, "localhost");
      },
      with_workers(workers()));
}

TEST_P(TlsTest, FullDuplexReaderAndWriterFibersShareOneStream) {
  // The server writes 2 MB while reading 2 MB; so does the client: if one direction's wait held
  // the connection's lock, both ends would stall with full socket buffers.
  weft::run(
      [] {
        constexpr std::size_t kBytes = 2 << 20;
        net::TcpListener l = bounded_listener();
        const tls::ServerContext sctx = server_ctx();
        auto both_ways = [](tls::TlsStream& s, std::uint64_t out_seed, std::uint64_t in_seed) {
          weft::Task<void> w =
              weft::spawn([&] { must_ok(s.write_all(pattern(out_seed, kBytes)), "write"); });
          EXPECT_EQ(must(read_exactly(s, kBytes), "read"), pattern(in_seed, kBytes));
          w.join();
        };
        weft::Task<void> server = serve_one(l, sctx, [&](absl::StatusOr<tls::TlsStream> s) {
          tls::TlsStream st = must(std::move(s), "accept");
          both_ways(st, 2, 3);
        });
        tls::TlsStream c = must(tls::dial(l.local_addr(), client_ctx()), "dial");
        c.set_deadline(in(kIoBound));
        both_ways(c, 3, 2);
        server.join();
      },
      with_workers(workers()));
}

TEST_P(TlsTest, CloseFromAnotherFiberFailsABlockedRead) {
  weft::run(
      [] {
        net::TcpListener l = bounded_listener();
        weft::Chan<int> done(1);
        weft::Task<void> server = serve_one(l, server_ctx(), [&](absl::StatusOr<tls::TlsStream> s) {
          ASSERT_TRUE(s.ok());
          (void)done.recv();  // holds the connection open, silent
        });
        tls::TlsStream c = must(tls::dial(l.local_addr(), client_ctx()), "dial");
        c.set_deadline(in(kIoBound));
        weft::Task<absl::StatusOr<std::size_t>> reader = weft::spawn([&] {
          char buf[64];
          return c.read(buf, sizeof buf);
        });
        // Closing before the read parks is as valid as closing after: both must fail it.
        weft::this_fiber::sleep_for(std::chrono::milliseconds(5));
        c.close();
        absl::StatusOr<std::size_t> r = reader.join();
        EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
        EXPECT_FALSE(c.is_open());
        done.send(1);
        server.join();
      },
      with_workers(workers()));
}

TEST_P(TlsTest, AThousandConcurrentHandshakes) {
  weft::run(
      [] {
        // A thousand in the release and debug builds. A handshake costs ~1 ms of CPU under ASan
        // and ~60 ms under TSan, so those get fewer: all of them must fit in kIoBound on a
        // loaded machine, and 50 stress runs in CI's budget.
        constexpr int kConns = weft_test::kTsan ? 100 : weft_test::kSanitized ? 250 : 1000;
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0", 4096), "listen");
        l.set_deadline(in(kIoBound));
        // No handshake timeout of their own: the handshakes all progress together, and on a
        // loaded machine the last ones may finish after the default 10 s. The sockets' kIoBound
        // deadlines still bound every wait.
        tls::ServerConfig scfg;
        scfg.certificates = {{certs().path("server.pem"), certs().path("server.key")}};
        scfg.handshake_timeout = std::chrono::nanoseconds::zero();
        const tls::ServerContext sctx = must(tls::ServerContext::create(scfg), "server ctx");
        tls::ClientConfig ccfg;
        ccfg.ca_file = certs().path("ca.pem");
        ccfg.handshake_timeout = std::chrono::nanoseconds::zero();
        const tls::ClientContext cctx = must(tls::ClientContext::create(ccfg), "client ctx");
        weft::WaitGroup handlers;
        std::atomic<int> served{0};
        weft::Task<void> acceptor = weft::spawn([&] {
          for (int i = 0; i < kConns; ++i) {
            net::TcpStream tcp = must(l.accept(), "accept");
            tcp.set_deadline(in(kIoBound));
            handlers.add(1);
            weft::go([&, tcp = std::move(tcp)]() mutable {
              absl::StatusOr<tls::TlsStream> s = tls::accept(std::move(tcp), sctx);
              if (s.ok()) {
                char b[8];
                absl::StatusOr<std::size_t> n = s->read(b, sizeof b);
                if (n.ok() && *n > 0 && s->write_all(b, *n).ok()) served.fetch_add(1);
              }
              handlers.done();
            });
          }
        });
        weft::WaitGroup clients;
        std::atomic<int> ok{0};
        std::vector<std::string> errors(kConns);
        for (int i = 0; i < kConns; ++i) {
          clients.add(1);
          weft::go([&, i] {
            net::DialOptions o;
            o.timeout = kIoBound;
            absl::StatusOr<tls::TlsStream> c = tls::dial(l.local_addr(), cctx, o);
            if (c.ok()) {
              c->set_deadline(in(kIoBound));
              char b[8];
              absl::StatusOr<std::size_t> n;
              absl::Status w = c->write_all("ping");
              if (w.ok() && (n = c->read(b, sizeof b)).ok() && *n == 4) {
                ok.fetch_add(1);
              } else {
                errors[i] = (w.ok() ? n.status() : w).ToString();
              }
            } else {
              errors[i] = c.status().ToString();
            }
            clients.done();
          });
        }
        clients.wait();
        acceptor.join();
        handlers.wait();
        for (const std::string& e : errors) ASSERT_TRUE(e.empty()) << e;
        EXPECT_EQ(ok.load(), kConns);
        EXPECT_EQ(served.load(), kConns);
      },
      with_workers(workers()));
}

// ---- verification --------------------------------------------------------------------------

// Dials a server that presents `cert` and returns the client's handshake status.
absl::Status client_handshake_against(const std::string& cert, const std::string& name,
                                      const tls::ClientContext& cctx, std::string* server_err) {
  net::TcpListener l = bounded_listener();
  weft::Task<void> server =
      serve_one(l, server_ctx({}, cert),
                [&](absl::StatusOr<tls::TlsStream> s) { *server_err = s.status().ToString(); });
  net::TcpStream tcp = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
  tcp.set_deadline(in(kIoBound));
  absl::StatusOr<tls::TlsStream> c = tls::connect(std::move(tcp), cctx, name);
  server.join();
  return c.status();
}

TEST(TlsVerify, BadCertificatesAreRejectedWithTheReason) {
  weft::run([] {
    const tls::ClientContext cctx = client_ctx({});
    std::string server_err;
    absl::Status s = client_handshake_against("expired", "localhost", cctx, &server_err);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_TRUE(contains_ci(text(s), "certificate has expired")) << s;
    EXPECT_TRUE(contains_ci(text(s), "127.0.0.1:")) << s;  // which peer
    EXPECT_FALSE(server_err == "OK") << server_err;        // the server saw the alert

    s = client_handshake_against("other", "localhost", cctx, &server_err);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_TRUE(contains_ci(text(s), "hostname mismatch")) << s;

    s = client_handshake_against("self", "localhost", cctx, &server_err);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_TRUE(contains_ci(text(s), "self-signed")) << s;

    s = client_handshake_against("server", "127.0.0.1", cctx, &server_err);  // an IP SAN
    EXPECT_TRUE(s.ok()) << s;
    s = client_handshake_against("server", "127.0.0.2", cctx, &server_err);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_TRUE(contains_ci(text(s), "IP address mismatch")) << s;

    // The system store does not know the test CA either.
    const tls::ClientContext system = must(tls::ClientContext::create({}), "system ctx");
    s = client_handshake_against("server", "localhost", system, &server_err);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;

    // verify = false accepts anything (tests only).
    tls::ClientConfig insecure;
    insecure.verify = false;
    s = client_handshake_against("self", "", must(tls::ClientContext::create(insecure), "ctx"),
                                 &server_err);
    EXPECT_TRUE(s.ok()) << s;
  });
}

TEST(TlsVerify, MutualTlsRequiresAClientCertificateFromTheCa) {
  weft::run([] {
    tls::ServerConfig scfg;
    scfg.certificates = {{certs().path("server.pem"), certs().path("server.key")}};
    scfg.client_ca_file = certs().path("ca.pem");
    const tls::ServerContext sctx = must(tls::ServerContext::create(scfg), "server ctx");
    for (const bool with_cert : {false, true}) {
      net::TcpListener l = bounded_listener();
      absl::Status server_status;
      std::string subject;
      weft::Task<void> server = serve_one(l, sctx, [&](absl::StatusOr<tls::TlsStream> s) {
        server_status = s.status();
        if (s.ok()) {
          subject = s->peer_subject();
          char b[4];
          (void)s->read(b, sizeof b);  // the client's handshake ends with its certificate
        }
      });
      tls::ClientConfig ccfg;
      ccfg.ca_file = certs().path("ca.pem");
      if (with_cert)
        ccfg.client_certificate = {certs().path("client.pem"), certs().path("client.key")};
      const tls::ClientContext cctx = must(tls::ClientContext::create(ccfg), "client ctx");
      absl::StatusOr<tls::TlsStream> c = tls::dial(l.local_addr().replace(0, 9, "localhost"), cctx);
      if (c.ok()) {
        c->set_deadline(in(kIoBound));
        (void)c->write_all("x");
        char b[4];
        (void)c->read(b, sizeof b);  // TLS 1.3: a rejected certificate shows up here
      }
      server.join();
      if (with_cert) {
        EXPECT_TRUE(server_status.ok()) << server_status;
        EXPECT_EQ(subject, "CN=weft-client");
      } else {
        EXPECT_EQ(server_status.code(), absl::StatusCode::kUnauthenticated) << server_status;
        EXPECT_TRUE(contains_ci(text(server_status), "certificate")) << server_status;
      }
    }
  });
}

TEST(TlsSni, TheNameTheClientAsksForPicksTheCertificate) {
  weft::run([] {
    tls::ServerConfig scfg;
    scfg.certificates = {{certs().path("server.pem"), certs().path("server.key")},
                         {certs().path("other.pem"), certs().path("other.key")}};
    const tls::ServerContext sctx = must(tls::ServerContext::create(scfg), "server ctx");
    const tls::ClientContext cctx = client_ctx({});
    for (const char* name : {"localhost", "other.example"}) {
      net::TcpListener l = bounded_listener();
      weft::Task<void> server = serve_one(l, sctx, echo);
      net::TcpStream tcp = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
      tcp.set_deadline(in(kIoBound));
      tls::TlsStream c = must(tls::connect(std::move(tcp), cctx, name), name);
      EXPECT_EQ(c.peer_subject(), std::string("CN=") + name);
      must_ok(c.shutdown(), "shutdown");
      EXPECT_EQ(must(read_to_eof(c), "eof"), "");
      server.join();
    }
  });
}

TEST(TlsAlpn, NoProtocolInCommonIsRefused) {
  weft::run([] {
    net::TcpListener l = bounded_listener();
    absl::Status server_status;
    weft::Task<void> server =
        serve_one(l, server_ctx({"h2"}),
                  [&](absl::StatusOr<tls::TlsStream> s) { server_status = s.status(); });
    absl::StatusOr<tls::TlsStream> c = tls::dial(l.local_addr(), client_ctx({"http/1.1"}));
    server.join();
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
    EXPECT_TRUE(contains_ci(text(c.status()), "no application protocol")) << c.status();
    EXPECT_FALSE(server_status.ok());
  });
}

TEST(TlsResumption, TheSecondConnectionResumesTheFirstSession) {
  weft::run([] {
    const tls::ServerContext sctx = server_ctx();
    const tls::ClientContext cctx = client_ctx();
    for (int round = 0; round < 2; ++round) {
      net::TcpListener l = bounded_listener();
      weft::Task<void> server = serve_one(l, sctx, echo);
      tls::TlsStream c = must(tls::dial(l.local_addr(), cctx), "dial");
      c.set_deadline(in(kIoBound));
      EXPECT_EQ(c.session_reused(), round == 1) << "round " << round;
      must_ok(c.write_all("hi"), "write");
      must_ok(c.shutdown(), "shutdown");
      EXPECT_EQ(must(read_to_eof(c), "read"), "hi");  // the tickets arrive before the echo
      server.join();
      EXPECT_EQ(cctx.cached_sessions(), 1u);
    }
  });
}

// ---- stalls, truncation, strangers -----------------------------------------------------------

TEST(TlsFaults, APeerThatStallsMidHandshakeIsBoundedByTheTimeout) {
  weft::run([] {
    tls::ServerConfig scfg;
    scfg.certificates = {{certs().path("server.pem"), certs().path("server.key")}};
    scfg.handshake_timeout = std::chrono::milliseconds(200);
    const tls::ServerContext sctx = must(tls::ServerContext::create(scfg), "server ctx");
    net::TcpListener l = bounded_listener();
    absl::Status server_status;
    weft::Task<void> server =
        serve_one(l, sctx, [&](absl::StatusOr<tls::TlsStream> s) { server_status = s.status(); });
    // A client that sends the first 3 bytes of a record header, then nothing.
    net::TcpStream raw = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
    must_ok(raw.write_all(std::string_view("\x16\x03\x01", 3)), "write");
    server.join();
    EXPECT_EQ(server_status.code(), absl::StatusCode::kDeadlineExceeded) << server_status;
    EXPECT_TRUE(contains_ci(text(server_status), "tls handshake")) << server_status;

    // And a server that accepts the TCP connection and never answers the client's hello.
    tls::ClientConfig ccfg;
    ccfg.ca_file = certs().path("ca.pem");
    ccfg.handshake_timeout = std::chrono::milliseconds(200);
    const tls::ClientContext cctx = must(tls::ClientContext::create(ccfg), "client ctx");
    net::TcpListener silent = bounded_listener();
    absl::StatusOr<tls::TlsStream> c = tls::dial(silent.local_addr(), cctx);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  });
}

// A client that connects and says nothing costs no TLS state: accept() waits for its first bytes
// before it makes an SSL object, and the handshake timeout ends that wait.
TEST(TlsFaults, ASilentClientIsDroppedBeforeAnyTlsStateAtTheHandshakeTimeout) {
  weft::run([] {
    tls::ServerConfig scfg;
    scfg.certificates = {{certs().path("server.pem"), certs().path("server.key")}};
    scfg.handshake_timeout = std::chrono::milliseconds(200);
    const tls::ServerContext sctx = must(tls::ServerContext::create(scfg), "server ctx");
    net::TcpListener l = bounded_listener();
    absl::Status server_status;
    weft::Task<void> server =
        serve_one(l, sctx, [&](absl::StatusOr<tls::TlsStream> s) { server_status = s.status(); });
    net::TcpStream raw = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
    server.join();
    EXPECT_EQ(server_status.code(), absl::StatusCode::kDeadlineExceeded) << server_status;
    EXPECT_TRUE(contains_ci(text(server_status), "waiting for the ClientHello")) << server_status;
  });
}

// A ClientHello that arrives one byte at a time (a relay between client and server cuts the
// client's first 2 KiB into single-byte writes) still completes the handshake: the wait for the
// first bytes ends at the first byte, and OpenSSL assembles the rest.
TEST_P(TlsTest, AClientHelloThatArrivesInPiecesCompletesTheHandshake) {
  weft::run(
      [] {
        net::TcpListener l = bounded_listener();
        weft::Task<void> server = serve_one(l, server_ctx(), echo);
        net::TcpListener relay_l = bounded_listener();
        weft::Task<void> relay = weft::spawn([&] {
          net::TcpStream from = must(relay_l.accept(), "relay accept");
          net::TcpStream to = must(net::dial_tcp(l.local_addr(), kIoBound), "relay dial");
          from.set_deadline(in(kIoBound));
          to.set_deadline(in(kIoBound));
          weft::Task<void> down = weft::spawn([&] {
            char buf[4096];
            for (;;) {
              absl::StatusOr<std::size_t> n = to.read(buf, sizeof buf);
              if (!n.ok() || *n == 0 || !from.write_all(buf, *n).ok()) break;
            }
            (void)from.shutdown_write();
          });
          char buf[4096];
          std::size_t sent = 0;
          for (;;) {
            absl::StatusOr<std::size_t> n = from.read(buf, sizeof buf);
            if (!n.ok() || *n == 0) break;
            for (std::size_t i = 0; i < *n; ++i, ++sent) {
              if (sent >= 2048) {
                must_ok(to.write_all(buf + i, *n - i), "relay write");
                sent += *n - i;
                break;
              }
              must_ok(to.write_all(buf + i, 1), "relay write");
              weft::this_fiber::sleep_for(std::chrono::microseconds(200));
            }
          }
          (void)to.shutdown_write();
          down.join();
        });
        net::TcpStream tcp = must(net::dial_tcp(relay_l.local_addr(), kIoBound), "dial");
        tcp.set_deadline(in(kIoBound));
        tls::TlsStream c = must(tls::connect(std::move(tcp), client_ctx(), "localhost"), "connect");
        const std::string msg = pattern(2, 5000);
        must_ok(c.write_all(msg), "write_all");
        must_ok(c.shutdown(), "shutdown");
        EXPECT_EQ(must(read_to_eof(c), "read_to_eof"), msg);
        server.join();
        relay.join();
      },
      with_workers(workers()));
}

TEST(TlsFaults, APlainTextClientOnTheTlsPortIsToldOff) {
  weft::run([] {
    net::TcpListener l = bounded_listener();
    absl::Status server_status;
    weft::Task<void> server = serve_one(
        l, server_ctx(), [&](absl::StatusOr<tls::TlsStream> s) { server_status = s.status(); });
    net::TcpStream raw = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
    raw.set_deadline(in(kIoBound));
    must_ok(raw.write_all("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "write");
    server.join();
    EXPECT_EQ(server_status.code(), absl::StatusCode::kUnavailable) << server_status;
    EXPECT_TRUE(contains_ci(text(server_status), "is the peer speaking TLS")) << server_status;
    // The client sees the connection end, with an alert or without.
    absl::StatusOr<std::string> rest = read_to_eof(raw);
    (void)rest;

    // A TLS client that reaches a plain-text server.
    net::TcpListener plain = bounded_listener();
    weft::Task<void> talker = weft::spawn([&] {
      net::TcpStream s = must(plain.accept(), "accept");
      (void)s.write_all("+OK plain text here\r\n");
      s.set_deadline(in(kIoBound));
      (void)read_to_eof(s);
    });
    absl::StatusOr<tls::TlsStream> c = tls::dial(plain.local_addr(), client_ctx());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
    EXPECT_TRUE(contains_ci(text(c.status()), "is the peer speaking TLS")) << c.status();
    talker.join();
  });
}

TEST(TlsFaults, ATruncatedRecordOrAMissingCloseNotifyIsDataLossNotEndOfStream) {
  weft::run([] {
    const tls::ServerContext sctx = server_ctx();
    const tls::ClientContext cctx = client_ctx();
    // Case 1: a relay between client and server forwards 10 bytes of the client's first record
    // after the handshake, then ends the connection to the server.
    {
      net::TcpListener front = bounded_listener();  // the relay's side for the client
      net::TcpListener back = bounded_listener();   // the server's
      weft::Chan<int> handshaken(1);
      std::atomic<bool> truncate{false};
      absl::Status server_read;
      weft::Task<void> server = serve_one(back, sctx, [&](absl::StatusOr<tls::TlsStream> s) {
        tls::TlsStream st = must(std::move(s), "accept");
        handshaken.send(1);
        char b[256];
        server_read = st.read(b, sizeof b).status();
      });
      weft::Task<void> relay = weft::spawn([&] {
        net::TcpStream a = must(front.accept(), "relay accept");
        net::TcpStream b = must(net::dial_tcp(back.local_addr(), kIoBound), "relay dial");
        a.set_deadline(in(kIoBound));
        b.set_deadline(in(kIoBound));
        weft::Task<void> down = weft::spawn([&] {  // server -> client, whole
          char buf[4096];
          for (;;) {
            absl::StatusOr<std::size_t> n = b.read(buf, sizeof buf);
            if (!n.ok() || *n == 0 || !a.write_all(buf, *n).ok()) return;
          }
        });
        char buf[4096];
        for (;;) {
          absl::StatusOr<std::size_t> n = a.read(buf, sizeof buf);
          if (!n.ok() || *n == 0) break;
          if (truncate.load()) {
            (void)b.write_all(buf, std::min<std::size_t>(*n, 10));
            break;
          }
          if (!b.write_all(buf, *n).ok()) break;
        }
        (void)b.shutdown_write();
        down.join();
      });
      net::TcpStream tcp = must(net::dial_tcp(front.local_addr(), kIoBound), "dial");
      tcp.set_deadline(in(kIoBound));
      tls::TlsStream c = must(tls::connect(std::move(tcp), cctx, "localhost"), "connect");
      (void)handshaken.recv();  // the server has the client's Finished: the next bytes are data
      truncate.store(true);
      must_ok(c.write_all(pattern(5, 100)), "write");
      server.join();
      EXPECT_EQ(server_read.code(), absl::StatusCode::kDataLoss) << server_read;
      c.close();
      relay.join();
    }
    // Case 2: the client closes the TCP connection without close_notify, between records. The
    // server sends no session tickets here: a client closing with tickets unread would send a
    // reset instead of an end of stream.
    {
      tls::ServerConfig no_tickets;
      no_tickets.certificates = {{certs().path("server.pem"), certs().path("server.key")}};
      no_tickets.session_resumption = false;
      const tls::ServerContext sctx = must(tls::ServerContext::create(no_tickets), "ctx");
      net::TcpListener l = bounded_listener();
      std::string got;
      absl::Status end;
      weft::Task<void> server = serve_one(l, sctx, [&](absl::StatusOr<tls::TlsStream> s) {
        tls::TlsStream st = must(std::move(s), "accept");
        char b[256];
        for (;;) {
          absl::StatusOr<std::size_t> n = st.read(b, sizeof b);
          if (!n.ok() || *n == 0) {
            end = n.status();
            return;
          }
          got.append(b, *n);
        }
      });
      tls::TlsStream c = must(tls::dial(l.local_addr(), cctx), "dial");
      must_ok(c.write_all("abc"), "write");
      c.close();
      server.join();
      EXPECT_EQ(got, "abc");
      EXPECT_EQ(end.code(), absl::StatusCode::kDataLoss) << end;
      EXPECT_TRUE(contains_ci(text(end), "close_notify")) << end;
    }
  });
}

TEST(TlsFaults, DeadlinesAndContextsBoundReads) {
  weft::run([] {
    net::TcpListener l = bounded_listener();
    weft::Chan<int> done(1);
    weft::Task<void> server = serve_one(l, server_ctx(), [&](absl::StatusOr<tls::TlsStream> s) {
      ASSERT_TRUE(s.ok());
      (void)done.recv();
    });
    tls::TlsStream c = must(tls::dial(l.local_addr(), client_ctx()), "dial");
    char b[16];
    c.set_read_deadline(in(std::chrono::milliseconds(50)));
    absl::StatusOr<std::size_t> r = c.read(b, sizeof b);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    c.set_read_deadline({});
    auto [ctx, cancel] = weft::with_cancel(weft::background());
    c.set_context(ctx);
    weft::go([cancel = cancel] { cancel(); });
    r = c.read(b, sizeof b);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
    done.send(1);
    server.join();
  });
}

TEST(TlsConfig, UnusableFilesAreReportedByName) {
  tls::ServerConfig cfg;
  absl::StatusOr<tls::ServerContext> s = tls::ServerContext::create(cfg);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  cfg.certificates = {{certs().path("missing.pem"), certs().path("server.key")}};
  s = tls::ServerContext::create(cfg);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains_ci(text(s.status()), "missing.pem")) << s.status();
  cfg.certificates = {{certs().path("server.pem"), certs().path("other.key")}};
  s = tls::ServerContext::create(cfg);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains_ci(text(s.status()), "does not match")) << s.status();
  tls::ClientConfig ccfg;
  ccfg.ca_file = certs().path("nope.pem");
  EXPECT_EQ(tls::ClientContext::create(ccfg).status().code(), absl::StatusCode::kInvalidArgument);
  ccfg = {};
  ccfg.alpn = {std::string(300, 'x')};
  EXPECT_EQ(tls::ClientContext::create(ccfg).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- real peers: openssl s_client and s_server ----------------------------------------------

TEST(TlsInterop, OpensslSClientTalksToAWeftServer) {
  weft::run([] {
    net::TcpListener l = bounded_listener();
    const tls::ServerContext sctx = server_ctx();
    // TLS 1.3, then 1.2 twice (the second resumes the first's session), then 1.1 (refused).
    const std::string sess = certs().path("s_client.sess");
    const std::vector<std::string> flags = {"-tls1_3", "-tls1_2 -sess_out " + sess,
                                            "-tls1_2 -sess_in " + sess, "-tls1_1"};
    for (const std::string& f : flags) {
      weft::Task<void> server = serve_one(l, sctx, [](absl::StatusOr<tls::TlsStream> s) {
        if (!s.ok()) return;
        std::string line;
        char b[256];
        while (line.find('\n') == std::string::npos) {
          absl::StatusOr<std::size_t> n = s->read(b, sizeof b);
          if (!n.ok() || *n == 0) return;
          line.append(b, *n);
        }
        (void)s->write_all("echo: " + line);
        (void)s->shutdown();
      });
      const std::string cmd = "echo hello | timeout 20 openssl s_client -connect " +
                              l.local_addr() + " -servername localhost -CAfile " +
                              certs().path("ca.pem") + " -verify_return_error -ign_eof " + f +
                              " 2>&1";
      ToolResult r = weft::blocking([&] { return run_tool(cmd); });
      server.join();
      if (f == "-tls1_1") {
        EXPECT_NE(r.status, 0) << r.out;
        EXPECT_EQ(r.out.find("echo: hello"), std::string::npos) << r.out;
        continue;
      }
      EXPECT_EQ(r.status, 0) << f << "\n" << r.out;
      EXPECT_NE(r.out.find("echo: hello"), std::string::npos) << f << "\n" << r.out;
      EXPECT_NE(r.out.find("Verify return code: 0 (ok)"), std::string::npos) << r.out;
      if (f.find("-sess_in") != std::string::npos) {
        EXPECT_NE(r.out.find("Reused, TLSv1.2"), std::string::npos) << r.out;
      }
    }
  });
}

TEST(TlsInterop, AWeftClientTalksToOpensslSServer) {
  weft::run([] {
    // s_server -rev answers each line reversed; -naccept 1 exits after one connection. It
    // prints "ACCEPT 127.0.0.1:PORT" once listening; we read it from its output pipe.
    const std::string cmd =
        "exec timeout 30 openssl s_server -accept 127.0.0.1:0 -naccept 1 -rev -cert " +
        certs().path("server.pem") + " -key " + certs().path("server.key") + " 2>&1";
    FILE* p = weft::blocking([&] { return ::popen(cmd.c_str(), "r"); });
    ASSERT_NE(p, nullptr);
    std::string addr;
    while (addr.empty()) {
      char line[512];
      if (!weft::blocking([&] { return std::fgets(line, sizeof line, p) != nullptr; })) break;
      std::string_view v(line);
      if (v.starts_with("ACCEPT ")) addr = std::string(v.substr(7, v.find('\n') - 7));
    }
    ASSERT_FALSE(addr.empty());
    tls::TlsStream c =
        must(tls::dial(addr.replace(0, addr.rfind(':'), "localhost"), client_ctx({})), "dial");
    c.set_deadline(in(kIoBound));
    must_ok(c.write_all("weft\n"), "write");
    std::string got;
    char b[64];
    while (got.find('\n') == std::string::npos) {
      absl::StatusOr<std::size_t> n = c.read(b, sizeof b);
      ASSERT_TRUE(n.ok()) << n.status();
      ASSERT_GT(*n, 0u);
      got.append(b, *n);
    }
    EXPECT_EQ(got.substr(0, got.find('\n')), "tfew");
    EXPECT_EQ(c.version(), tls::Version::kTls13);
    (void)c.shutdown();
    c.close();
    weft::blocking([&] { return ::pclose(p); });
  });
}

}  // namespace
