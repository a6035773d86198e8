// Proves that weft::net survives fd exhaustion (EMFILE): TcpListener::accept backs off instead of
// spinning while no fd is free (the process's CPU time stays low), reports it once on stderr,
// and accepts and serves the pending connection once fds are freed; dial_tcp fails cleanly
// (kResourceExhausted) meanwhile; a listener's deadline or close() still ends an accept that is
// backing off. Each scenario lowers RLIMIT_NOFILE (soft and hard, after run() started, since the
// runtime raises the soft limit to the hard one at start) for a whole process, so it runs in a
// death-test child (a fresh process: fork + exec) with an alarm that turns a hang into a failure.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <vector>
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;
using absl::StatusCode;

void arm_alarm() { exit_on_hang("an EMFILE scenario", kSanitized ? 120 : 30); }

// Lowers both limits to a few fds above those open now (nothing can raise them again).
void lower_fd_limit() {
  const int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const rlim_t limit = static_cast<rlim_t>(probe) + 32;
  close(probe);
  const rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) throw std::runtime_error("setrlimit failed");
}

// Holds every free fd (of /dev/null) until released.
struct FdHog {
  std::vector<int> fds;
  int last_errno = 0;
  void exhaust() {
    for (;;) {
      const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        last_errno = errno;
        return;
      }
      fds.push_back(fd);
    }
  }
  void release(std::size_t n) {
    for (; n > 0 && !fds.empty(); --n) {
      close(fds.back());
      fds.pop_back();
    }
  }
  void release_all() { release(fds.size()); }
  ~FdHog() { release_all(); }
};

double cpu_ms() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)) * 1e3 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

class NetEmfileTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(NetEmfileTest);

void serve_through_fd_exhaustion(const weft::Options& o) {
  weft::run(
      [] {
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0", 16), "listen");
        const std::string addr = l.local_addr();
        std::atomic<int> served{0};
        auto server = weft::spawn([&] {
          for (int i = 0; i < 2; ++i) {
            absl::StatusOr<net::TcpStream> c = l.accept();  // no deadline: it must not give up
            if (!c.ok()) {
              ADD_FAILURE() << "accept: " << c.status();
              return;
            }
            c->set_deadline(in(kIoBound));
            absl::StatusOr<std::string> req = read_exactly(*c, 4);
            if (!req.ok() || *req != "ping") {
              ADD_FAILURE() << "request: " << (req.ok() ? *req : text(req.status()));
              return;
            }
            if (absl::Status s = c->write_all("pong"); !s.ok()) {
              ADD_FAILURE() << "reply: " << s;
              return;
            }
            ++served;
          }
        });
        weft::this_fiber::sleep_for(20ms);  // the server parks in accept
        lower_fd_limit();
        FdHog hog;
        hog.exhaust();
        ASSERT_EQ(hog.last_errno, EMFILE);
        // No fd left: dial fails cleanly.
        absl::StatusOr<net::TcpStream> none = net::dial_tcp(addr, 1s);
        EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted) << none.status();
        // One fd for the client: the kernel completes the handshake, and the server's accept4
        // fails with EMFILE, with the connection pending in the backlog.
        hog.release(1);
        net::TcpStream c = must(net::dial_tcp(addr, kIoBound), "dial with the last fd");
        c.set_deadline(in(kIoBound));
        must_ok(c.write_all("ping"), "write ping");
        const double cpu0 = cpu_ms();
        const auto t0 = Clock::now();
        weft::this_fiber::sleep_for(300ms);
        const double cpu = cpu_ms() - cpu0;
        const double wall = ms_since(t0);
        EXPECT_EQ(served.load(), 0) << "served although no fd was free";
        // A spinning accept would burn a whole core: CPU time about equal to wall time.
        EXPECT_LT(cpu, wall * 0.4)
            << "accept spins on EMFILE: " << cpu << " ms CPU in " << wall << " ms";
        hog.release_all();
        const auto t1 = Clock::now();
        absl::StatusOr<std::string> reply = read_exactly(c, 4);
        ASSERT_TRUE(reply.ok()) << reply.status();
        EXPECT_EQ(*reply, "pong");
        // The back-off sleeps in 5 ms slices and counts them, not the clock, so every slice's
        // lateness adds up: a loaded sanitizer run stretches its ~1 s, and gets a wider bound.
        // (A back-off that never retried would wait for the client's 60 s / 20 s deadline.)
        EXPECT_LT(ms_since(t1), kSanitized ? 10000.0 : 2500.0)
            << "the back-off should retry within about a second";
        // Back to normal: the next connection is served at once.
        net::TcpStream c2 = must(net::dial_tcp(addr, kIoBound), "second dial");
        c2.set_deadline(in(kIoBound));
        must_ok(c2.write_all("ping"), "second ping");
        absl::StatusOr<std::string> reply2 = read_exactly(c2, 4);
        ASSERT_TRUE(reply2.ok()) << reply2.status();
        EXPECT_EQ(*reply2, "pong");
        server.join();
        EXPECT_EQ(served.load(), 2);
      },
      o);
}

TEST_P(NetEmfileTest, AcceptBacksOffWithoutSpinningAndServesThePendingConnection) {
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        arm_alarm();
        serve_through_fd_exhaustion(o);
        exit_with_result();
      },
      ::testing::ExitedWithCode(0), "backing off and retrying");  // reported on stderr
}

// Puts `l`'s accept into its EMFILE back-off: exhausts fds (in `hog`) but for one, which a client
// (returned) takes to connect.
net::TcpStream start_backing_off(net::TcpListener& l, FdHog& hog) {
  lower_fd_limit();
  hog.exhaust();
  if (hog.last_errno != EMFILE) throw std::runtime_error("could not exhaust the fds");
  hog.release(1);
  net::TcpStream c = must(net::dial_tcp(l.local_addr(), kIoBound), "dial with the last fd");
  weft::this_fiber::sleep_for(300ms);  // accept4 failed with EMFILE and is sleeping it off
  return c;
}

void deadline_during_backoff() {
  weft::run(
      [] {
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0", 16), "listen");
        auto server = weft::spawn([&] {
          absl::StatusOr<net::TcpStream> c = l.accept();
          return c.status();
        });
        weft::this_fiber::sleep_for(20ms);
        FdHog hog;
        net::TcpStream c = start_backing_off(l, hog);
        const auto t0 = Clock::now();
        l.set_deadline(t0 + 50ms);
        absl::Status st = server.join();
        const double ms = ms_since(t0);
        EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st;
        // The deadline is looked at between back-off steps (up to 1 s of 5 ms slices, each of
        // which a loaded sanitizer run makes later); a back-off that ignored it would never end.
        EXPECT_LT(ms, kSanitized ? 10000.0 : 1500.0)
            << "the deadline was overshot by the back-off sleep";
      },
      with_workers(2));
}

TEST(NetEmfileDeathTest, ADeadlineEndsAnAcceptThatIsBackingOff) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        arm_alarm();
        deadline_during_backoff();
        exit_with_result();
      },
      ::testing::ExitedWithCode(0), "");
}

void close_during_backoff() {
  weft::run(
      [] {
        net::TcpListener l1 = must(net::listen_tcp("127.0.0.1:0", 16), "listen l1");
        auto server = weft::spawn([&] {
          absl::StatusOr<net::TcpStream> c = l1.accept();
          return c.ok() ? absl::InternalError(
                              "accept on the closed listener returned a "
                              "connection from " +
                              c->peer_addr() + " to " + c->local_addr())
                        : c.status();
        });
        weft::this_fiber::sleep_for(20ms);
        FdHog hog;
        net::TcpStream c1 = start_backing_off(l1, hog);
        const int old_fd = l1.fd();
        const auto t0 = Clock::now();
        l1.close();  // wakes the backing-off accept; its fd is released when that call leaves
        absl::Status st = server.join();
        absl::StatusOr<net::TcpListener> l2_or = net::listen_tcp("127.0.0.1:0", 16);
        if (!l2_or.ok()) {  // a sanitizer runtime took the freed fd first
          hog.release(1);
          l2_or = net::listen_tcp("127.0.0.1:0", 16);
        }
        net::TcpListener l2 = must(std::move(l2_or), "listen l2");
        // Only then can the closed listener's accept reach l2's connections (always so in
        // Release builds; the checks below hold either way).
        if (l2.fd() != old_fd) std::fprintf(stderr, "note: fd %d was not reused\n", old_fd);
        hog.release_all();
        net::TcpStream c2 = must(net::dial_tcp(l2.local_addr(), kIoBound), "dial l2");
        EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st;
        EXPECT_LT(ms_since(t0), 2500.0);
        // l2's pending connection is still there for l2.
        l2.set_deadline(in(2s));
        absl::StatusOr<net::TcpStream> a = l2.accept();
        EXPECT_TRUE(a.ok()) << "l2's pending connection is gone: " << a.status();
      },
      with_workers(2));
}

// Regression: accept's EMFILE back-off once kept the listener's fd number across its sleep and
// called accept4 on it again before it looked at the descriptor: with the listener closed
// meanwhile and the number reused by another listening socket, the closed listener's accept()
// took (stole) that socket's pending connection and returned it as a success.
TEST(NetEmfileDeathTest, CloseEndsAnAcceptThatIsBackingOffWithoutTouchingAReusedFd) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        arm_alarm();
        close_during_backoff();
        exit_with_result();
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
