// examples/http_server as a black box, in a process of its own: GET / answers "Hello, World!";
// HEAD answers the same headers (Content-Length included) and no body, so the next response on a
// keep-alive connection starts right after HEAD's headers (a body there was read by curl as
// "Excess found" and broke the framing); a pipelined HEAD + GET + HEAD gets three responses in
// order; an unknown path is 404 and HEAD of it has no body either; a method other than GET/HEAD
// is 405.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>

#include <string>
#include <string_view>
#include <weft/weft.hpp>

#include "child_server.hpp"
#include "net_test_util.hpp"
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

TEST(HttpsServerTest, CurlFetchesOverTlsAndAPlainClientIsRefused) {
  char tmpl[] = "/tmp/weft-https-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  int st = -1;
  const std::string made = shell(
      "cd " + dir +
          " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
          "-keyout key.pem -out cert.pem -days 30 -subj /CN=localhost "
          "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>&1",
      &st);
  ASSERT_EQ(st, 0) << made;
  ChildServer server{WEFT_HTTP_SERVER};
  ASSERT_EQ(server.start({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem"}), "");
  const std::string port = server.addr().substr(server.addr().rfind(':') + 1);
  // Two requests on one connection (keep-alive over TLS), then HEAD.
  const std::string curl = "curl -sS --max-time 20 --cacert " + dir + "/cert.pem --resolve localhost:" +
                           port + ":127.0.0.1 ";
  const std::string url = "https://localhost:" + port + "/";
  std::string out = shell(curl + url + " " + url + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(out, "Hello, World!Hello, World!");
  out = shell(curl + "-I " + url + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK", 0), 0u) << out;
  // curl without the CA refuses the server; plain HTTP on the TLS port gets no HTTP answer.
  out = shell("curl -sS --max-time 20 --resolve localhost:" + port + ":127.0.0.1 " + url + " 2>&1", &st);
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

}  // namespace
