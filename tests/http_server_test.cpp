// examples/http_server as a black box, in a process of its own: GET / answers "Hello, World!";
// HEAD answers the same headers (Content-Length included) and no body, so the next response on a
// keep-alive connection starts right after HEAD's headers (a body there was read by curl as
// "Excess found" and broke the framing); a pipelined HEAD + GET + HEAD gets three responses in
// order; an unknown path is 404 and HEAD of it has no body either; a method other than GET/HEAD
// is 405.
#include <gtest/gtest.h>

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

}  // namespace
