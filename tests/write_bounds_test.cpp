// Clients that never read (issue 39, examples/common/write_bounds.hpp): resp_server, echo_server
// and chat_server, each a child process with a 1 s write timeout, get clients that send requests
// and never read the replies. Each such client must be closed by the server eventually (within a
// generous bound: the time the kernel's buffers take to fill is not the server's), a client that
// reads must be served meanwhile, and the server's RSS must stay bounded while they are held.
// Also echo_server's connection cap and idle timeout (it had neither).
//
// The hostile clients are plain non-blocking sockets with a small receive buffer; "closed by the
// server" is what poll() says without reading: POLLRDHUP, POLLHUP or POLLERR (the server's close
// with their requests unread is a reset).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "child_server.hpp"
#include "test_util.hpp"

namespace {

using weft_test::ChildServer;
using SteadyClock = std::chrono::steady_clock;

// Generous: the bound is for a loaded CI machine (and sanitizers), not a timing claim.
constexpr std::chrono::seconds kCloseBound{weft_test::kSanitized ? 180 : 90};

int connect_to(const std::string& addr, int rcvbuf = 0) {
  const std::size_t colon = addr.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1))));
  inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  timeval tv{10, 0};  // a blocking client's reads and writes give up after this
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads until `want` has been seen (true) or the connection ends or times out (false).
bool read_until(int fd, const std::string& want, std::string* seen = nullptr) {
  std::string got;
  char buf[4096];
  while (got.find(want) == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  if (seen) *seen = got;
  return got.find(want) != std::string::npos;
}

// A one-request client that reads: sends `request`, expects `reply` back.
bool served(const std::string& addr, const std::string& request, const std::string& reply) {
  const int fd = connect_to(addr);
  if (fd < 0) return false;
  const bool ok = send_all(fd, request) && read_until(fd, reply);
  close(fd);
  return ok;
}

// Clients that send `request` over and over, as fast as the server takes it (each at most `limit`
// bytes; 0: no limit), and never read.
class NeverReaders {
 public:
  NeverReaders(const std::string& addr, int n, std::string request, std::size_t limit = 0)
      : limit_(limit) {
    while (block_.size() < 16384) block_ += request;
    for (int i = 0; i < n; ++i) {
      const int fd = connect_to(addr, /*rcvbuf=*/4096);
      if (fd < 0) continue;
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      fds_.push_back(pollfd{fd, POLLOUT | POLLRDHUP, 0});
      sent_.push_back(0);
    }
  }
  NeverReaders(const NeverReaders&) = delete;
  NeverReaders& operator=(const NeverReaders&) = delete;
  ~NeverReaders() {
    for (const pollfd& p : fds_) close(p.fd);
  }
  std::size_t opened() const { return fds_.size(); }
  std::size_t closed() const { return closed_; }

  // Sends what the kernel takes on every open one and notes the ones the server closed; waits up
  // to `wait` for an event.
  void pump(std::chrono::milliseconds wait) {
    if (poll(fds_.data(), fds_.size(), static_cast<int>(wait.count())) <= 0) return;
    for (std::size_t i = 0; i < fds_.size(); ++i) {
      pollfd& p = fds_[i];
      if (p.fd < 0 || p.revents == 0) continue;
      bool gone = (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
      while (!gone && (p.revents & POLLOUT)) {
        std::size_t len = block_.size();
        if (limit_ > 0) len = std::min(len, limit_ - sent_[i]);
        const ssize_t n = send(p.fd, block_.data(), len, MSG_NOSIGNAL);
        if (n > 0) {
          sent_[i] += static_cast<std::size_t>(n);
          if (limit_ > 0 && sent_[i] == limit_) {
            p.events = POLLRDHUP;  // all sent: only the close is awaited
            break;
          }
          continue;
        }
        gone = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        break;
      }
      if (gone) {
        p.fd = ~p.fd;  // poll() skips negative fds; ~ keeps it for the close
        ++closed_;
      }
    }
  }

  // Pumps until the server has closed every one or `bound` passes; true if it closed them all.
  bool all_closed_within(std::chrono::seconds bound) {
    const auto end = SteadyClock::now() + bound;
    while (closed_ < fds_.size() && SteadyClock::now() < end) pump(std::chrono::milliseconds(50));
    return closed_ == fds_.size();
  }

 private:
  std::vector<pollfd> fds_;
  std::vector<std::size_t> sent_;
  std::size_t limit_;
  std::string block_;
  std::size_t closed_ = 0;
};

std::string resp(std::initializer_list<std::string> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

// Pumps `hostile` while checking, about every 100 ms, that a reading client is served and the
// server's RSS stays under `rss_limit`; then waits for the server to close them all.
void hold_and_check(ChildServer& srv, NeverReaders& hostile, const std::string& request,
                    const std::string& reply, long rss_limit) {
  ASSERT_EQ(hostile.opened(), 20u);
  int served_count = 0;
  long peak = 0;
  const auto end = SteadyClock::now() + kCloseBound;
  while (hostile.closed() < hostile.opened() && SteadyClock::now() < end) {
    hostile.pump(std::chrono::milliseconds(100));
    if (served(srv.addr(), request, reply)) ++served_count;
    peak = std::max(peak, srv.rss_bytes());
  }
  EXPECT_EQ(hostile.closed(), hostile.opened())
      << "the server did not close every client that never reads within " << kCloseBound.count()
      << " s";
  EXPECT_GT(served_count, 0) << "no reading client was served while the others did not read";
  EXPECT_LT(peak, rss_limit) << "RSS peaked at " << peak << " bytes";
  EXPECT_TRUE(served(srv.addr(), request, reply));
}

TEST(NeverRead, RespServerClosesClientsThatPipelineBigGetsAndServesOthers) {
  ChildServer srv(WEFT_RESP_SERVER);
  ASSERT_EQ(srv.start({"--write_timeout=1s", "--timeout=300s", "--command_timeout=30s"}), "");
  // The case: GET of a 1 MB value, pipelined, never read.
  ASSERT_TRUE(served(srv.addr(), resp({"SET", "big", std::string(1000000, 'v')}), "+OK\r\n"));
  NeverReaders hostile(srv.addr(), 20, resp({"GET", "big"}));
  // Each holds at most its reply and its input buffer while the write times out: a few MB each
  // at most, far from growing with the pipelined requests.
  hold_and_check(srv, hostile, resp({"PING"}), "+PONG\r\n", 400L << 20);
}

TEST(NeverRead, RespServerClosesClientsThatPipelinePingsAndServesOthers) {
  ChildServer srv(WEFT_RESP_SERVER);
  ASSERT_EQ(srv.start("--write_timeout=1s"), "");
  NeverReaders hostile(srv.addr(), 20, resp({"PING"}));
  hold_and_check(srv, hostile, resp({"PING"}), "+PONG\r\n", 200L << 20);
}

TEST(NeverRead, RespServerAnswersAReplyOverTheHardLimitWithAnErrorAndCloses) {
  ChildServer srv(WEFT_RESP_SERVER);
  ASSERT_EQ(srv.start("--output_hard_limit=100000"), "");
  ASSERT_TRUE(served(srv.addr(), resp({"SET", "big", std::string(200000, 'v')}), "+OK\r\n"));
  const int fd = connect_to(srv.addr());
  ASSERT_GE(fd, 0);
  // The PING's reply still goes out; the GET's is replaced by the error, then end of stream.
  ASSERT_TRUE(send_all(fd, resp({"PING"}) + resp({"GET", "big"}) + resp({"PING"})));
  std::string seen;
  EXPECT_FALSE(read_until(fd, "never sent", &seen));
  close(fd);
  EXPECT_EQ(seen.rfind("+PONG\r\n-ERR reply of 200011 bytes is over the output buffer limit", 0),
            0u)
      << seen;
  EXPECT_EQ(seen.find("+PONG", 1), std::string::npos) << "a command after it was answered";
  EXPECT_TRUE(served(srv.addr(), resp({"PING"}), "+PONG\r\n"));
}

TEST(NeverRead, EchoServerClosesClientsThatNeverReadAndServesOthers) {
  ChildServer srv(WEFT_ECHO_SERVER);
  ASSERT_EQ(srv.start("--write_timeout=1s"), "");
  NeverReaders hostile(srv.addr(), 20, std::string(63, 'x') + "\n");
  hold_and_check(srv, hostile, "hello\n", "hello\n", 200L << 20);
}

TEST(NeverRead, ChatServerDropsAMemberThatNeverReadsInAQuietRoom) {
  ChildServer srv(WEFT_CHAT_SERVER);
  // A queue budget too large to drop them as too slow: the write timeout must.
  ASSERT_EQ(
      srv.start(std::vector<std::string>{"--write_timeout=1s", "--out_queue_bytes=1073741824"}),
      "");
  const int reader = connect_to(srv.addr());
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(read_until(reader, "* welcome"));
  // Each hostile member says long lines, which come back to it (and to `reader`) as broadcasts.
  // Its own lines alone are more than the kernel can buffer on their way back to it (twice the
  // largest send buffer TCP autotunes to, plus a MiB; it reads nothing and its receive buffer is
  // 4 KiB), so its writer blocks whatever becomes of the others -- the room's lines are not
  // counted on, since members dropped early stop adding to it -- and the write timeout must drop
  // it.
  std::size_t wmem_max = 4 << 20;
  {
    std::ifstream f("/proc/sys/net/ipv4/tcp_wmem");
    std::size_t lo = 0, def = 0, max = 0;
    if (f >> lo >> def >> max && max > 0) wmem_max = max;
  }
  NeverReaders hostile(srv.addr(), 4, std::string(999, 'x') + "\n", 2 * wmem_max + (1 << 20));
  ASSERT_EQ(hostile.opened(), 4u);
  const auto end = SteadyClock::now() + kCloseBound;
  long peak = 0;
  char buf[65536];
  while (hostile.closed() < hostile.opened() && SteadyClock::now() < end) {
    hostile.pump(std::chrono::milliseconds(100));
    // `reader` keeps up with the room (non-blocking drain of what arrived).
    while (recv(reader, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
    peak = std::max(peak, srv.rss_bytes());
  }
  EXPECT_EQ(hostile.closed(), hostile.opened());
  EXPECT_LT(peak, 300L << 20) << "RSS peaked at " << peak << " bytes";
  // The reader is still a member: its own line comes back.
  ASSERT_TRUE(send_all(reader, "still here\n"));
  EXPECT_TRUE(read_until(reader, "> still here\n"));
  close(reader);
}

TEST(EchoServerBounds, IdleTimeoutClosesASilentConnection) {
  ChildServer srv(WEFT_ECHO_SERVER);
  ASSERT_EQ(srv.start("--idle_timeout=1s"), "");
  const int fd = connect_to(srv.addr());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "ping\n"));
  ASSERT_TRUE(read_until(fd, "ping\n"));
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0) << "not closed within SO_RCVTIMEO (10 s) of going idle";
  close(fd);
}

TEST(EchoServerBounds, ConnectionCapClosesNewcomersAndServesOnceOneLeaves) {
  ChildServer srv(WEFT_ECHO_SERVER);
  ASSERT_EQ(srv.start("--max_conns=2"), "");
  int held[2];
  for (int& fd : held) {
    fd = connect_to(srv.addr());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "hi\n"));
    ASSERT_TRUE(read_until(fd, "hi\n"));  // admitted: the slot is held from here
  }
  const int third = connect_to(srv.addr());
  ASSERT_GE(third, 0);
  char c;
  EXPECT_LE(recv(third, &c, 1, 0), 0) << "a connection past the cap was not closed";
  close(third);
  close(held[0]);
  // Its slot comes back once the server has seen the close.
  EXPECT_TRUE(weft_test::eventually([&] { return served(srv.addr(), "again\n", "again\n"); },
                                    std::chrono::seconds(30)));
  close(held[1]);
}

}  // namespace
