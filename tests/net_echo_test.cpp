// weft::net at scale: echo correctness over 10k concurrent TCP connections (workers 1 and 4), every
// connection with its own data checked byte for byte. The echo server is another process: fork +
// exec of this binary (/proc/self/exe) running only NetEchoChild.DISABLED_Serve, so that test must
// stay in this file; one process may hold only 20k fds here.
// Split from net_test.cpp, with net_stream_test.cpp (TCP streams, addresses), net_cancel_test.cpp
// (deadlines, close, misuse) and net_dgram_fd_test.cpp (UDP, Unix, IPv6, wait_fd). EMFILE survival
// lowers RLIMIT_NOFILE for a whole process: it lives in net_emfile_test.cpp.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"
extern char** environ;
namespace {

using namespace weft_test;
using namespace weft_net_test;
using absl::StatusCode;
// ---- 10k concurrent connections against an echo server in a child process ----------------------

constexpr const char* kEchoChildEnv = "WEFT_NET_TEST_ECHO_CHILD";

// The echo server half of NetEchoTest: a fresh process (fork + exec of this binary, running only
// this test) so that it shares no epoll instance or runtime state with the client process.
// "port_fd:stop_fd:workers:expected_connections" comes in the environment; it writes its address
// to port_fd, serves until stop_fd reads end of file, and fails unless it echoed `expected`
// connections without an error.
TEST(NetEchoChild, DISABLED_Serve) {
  const char* cfg = std::getenv(kEchoChildEnv);
  if (!cfg) GTEST_SKIP() << "only runs as NetEchoTest's server process";
  int port_fd = -1, stop_fd = -1;
  unsigned workers = 0;
  long expected = 0;
  ASSERT_EQ(std::sscanf(cfg, "%d:%d:%u:%ld", &port_fd, &stop_fd, &workers, &expected), 4) << cfg;
  std::atomic<long> served{0}, failed{0};
  std::mutex err_mu;
  std::string first_error;
  auto fail = [&](const std::string& what) {
    ++failed;
    std::lock_guard lock(err_mu);
    if (first_error.empty()) first_error = what;
  };
  weft::run(
      [&] {
        auto l = net::listen_tcp("127.0.0.1:0");
        ASSERT_TRUE(l.ok()) << l.status();
        const std::string addr = l->local_addr() + "\n";
        ASSERT_EQ(write(port_fd, addr.data(), addr.size()), static_cast<ssize_t>(addr.size()));
        close(port_fd);
        std::atomic<bool> stopping{false};
        auto acceptor = weft::spawn([&] {
          for (;;) {
            absl::StatusOr<net::TcpStream> c = l->accept();
            if (!c.ok()) {
              if (!stopping.load()) fail("accept: " + text(c.status()));
              return;
            }
            weft::go(
                [&](net::TcpStream s) {
                  s.set_deadline(in(kIoBound * 3));
                  char buf[16384];
                  for (;;) {
                    absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);
                    if (!n.ok()) return fail("server read: " + text(n.status()));
                    if (*n == 0) break;
                    if (absl::Status w = s.write_all(buf, *n); !w.ok()) {
                      return fail("server write: " + text(w));
                    }
                  }
                  ++served;  // before close: the client sees EOF only after this
                },
                std::move(*c));
          }
        });
        // Parent closes its end (or dies): end of file.
        const absl::Status st = net::wait_readable(stop_fd, in(600s));
        EXPECT_TRUE(st.ok()) << st;
        // Go's way to stop an accept loop: a passed deadline (closing the listener under a
        // blocked accept races in netpoll: see CloseFromAnotherFiberWakesBlockedCalls).
        stopping = true;
        l->set_deadline(std::chrono::steady_clock::now());
        acceptor.join();
      },
      // The acceptor never parks while connections pour in: no watchdog reports.
      with_workers(workers, /*watchdog=*/false));
  EXPECT_EQ(failed.load(), 0) << first_error;
  EXPECT_EQ(served.load(), expected);
}

// Runs NetEchoChild.DISABLED_Serve in a child process; kills and reaps it in any case.
class EchoChild {
 public:
  EchoChild() = default;
  EchoChild(const EchoChild&) = delete;
  EchoChild& operator=(const EchoChild&) = delete;
  ~EchoChild() {
    if (stop_w_ >= 0) close(stop_w_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
  }

  // Returns "" once the child listens (its address in addr()), else what went wrong.
  std::string start(unsigned workers, long expected) {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return "readlink /proc/self/exe failed";
    exe[n] = '\0';
    int port_pipe[2], stop_pipe[2];
    if (pipe2(port_pipe, O_CLOEXEC) != 0 || pipe2(stop_pipe, O_CLOEXEC) != 0) return "pipe2";
    // Everything the child needs is built before fork: after it only async-signal-safe calls.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
    env_strings.push_back(std::string(kEchoChildEnv) + "=" + std::to_string(port_pipe[1]) + ":" +
                          std::to_string(stop_pipe[0]) + ":" + std::to_string(workers) + ":" +
                          std::to_string(expected));
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string filter = "--gtest_filter=NetEchoChild.DISABLED_Serve";
    std::string disabled = "--gtest_also_run_disabled_tests";
    char* argv[] = {exe, filter.data(), disabled.data(), nullptr};
    const int port_w = port_pipe[1], stop_r = stop_pipe[0];
    pid_ = fork();
    if (pid_ < 0) return "fork failed";
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed parent
      fcntl(port_w, F_SETFD, 0);         // these two survive exec
      fcntl(stop_r, F_SETFD, 0);
      execve(exe, argv, envp.data());
      _exit(127);
    }
    close(port_pipe[1]);
    close(stop_pipe[0]);
    stop_w_ = stop_pipe[1];
    // The child's address, bounded: a child that dies closes the pipe (end of file).
    std::string got;
    const auto deadline = Clock::now() + (kSanitized ? 60s : 20s);
    while (got.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{port_pipe[0], POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[128];
      const ssize_t r = read(port_pipe[0], buf, sizeof buf);
      if (r <= 0) break;
      got.append(buf, static_cast<std::size_t>(r));
    }
    close(port_pipe[0]);
    if (got.find('\n') == std::string::npos) return "the echo child never reported its address";
    addr_ = got.substr(0, got.find('\n'));
    return "";
  }

  const std::string& addr() const { return addr_; }

  // Tells the child to stop and waits (bounded) for it; "" if it exited with status 0.
  std::string stop_and_wait(std::chrono::seconds timeout) {
    close(stop_w_);
    stop_w_ = -1;
    const auto deadline = Clock::now() + timeout;
    int st = 0;
    for (;;) {
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) break;
      if (r < 0) return "waitpid failed";
      if (Clock::now() > deadline) return "the echo child did not exit in time (killed)";
      std::this_thread::sleep_for(5ms);
    }
    pid_ = -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
    if (WIFEXITED(st)) return "the echo child exited with " + std::to_string(WEXITSTATUS(st));
    return "the echo child died of signal " + std::to_string(WTERMSIG(st));
  }

 private:
  pid_t pid_ = -1;
  int stop_w_ = -1;
  std::string addr_;
};

class NetEchoTest : public WorkersTest {};
INSTANTIATE_TEST_SUITE_P(Workers, NetEchoTest, ::testing::Values(1u, 4u), WorkersName);

TEST_P(NetEchoTest, TenThousandConcurrentConnectionsEchoByteForByte) {
  // 10k in Release; both processes crawl under the sanitizers (TSan most).
  const int kConns = kTsan ? 1000 : static_cast<int>(scaled(10000, 5));
  constexpr std::size_t kChunk = 1024;
  constexpr int kChunks = 4;
  EchoChild child;
  ASSERT_EQ(child.start(workers(), kConns), "");
  const std::string addr = child.addr();

  std::atomic<int> connected{0}, verified{0}, failed{0};
  int max_open = 0;
  std::mutex err_mu;
  std::string first_error;
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        auto fail = [&](const std::string& what) {
          ++failed;
          std::lock_guard lock(err_mu);
          if (first_error.empty()) first_error = what;
        };
        weft::Semaphore dial_slots(128);  // keeps SYNs under the listen backlog
        weft::Mutex mu;
        weft::CondVar all_dialed;
        int dialed = 0;
        int open = 0;
        std::vector<weft::Task<void>> clients;
        clients.reserve(static_cast<std::size_t>(kConns));
        for (int i = 0; i < kConns; ++i) {
          clients.push_back(weft::spawn([&, i] {
            dial_slots.acquire();
            absl::StatusOr<net::TcpStream> c = net::dial_tcp(addr, kIoBound);
            dial_slots.release();
            {
              // Barrier: nobody talks before every connection is open at once.
              std::unique_lock lock(mu);
              ++dialed;
              if (c.ok()) max_open = std::max(max_open, ++open);
              if (dialed == kConns) all_dialed.notify_all();
              all_dialed.wait_until(lock, in(kIoBound * 3), [&] { return dialed == kConns; });
            }
            if (!c.ok()) return fail("dial: " + text(c.status()));
            ++connected;
            c->set_deadline(in(kIoBound * 3));
            const std::string data = pattern(static_cast<std::uint64_t>(i), kChunk * kChunks);
            for (int k = 0; k < kChunks; ++k) {
              const std::string_view chunk(data.data() + k * kChunk, kChunk);
              if (absl::Status w = c->write_all(chunk); !w.ok()) {
                return fail("write: " + text(w));
              }
              absl::StatusOr<std::string> back = read_exactly(*c, kChunk);
              if (!back.ok()) return fail("read: " + text(back.status()));
              if (*back != chunk) {
                return fail("connection " + std::to_string(i) + " chunk " + std::to_string(k) +
                            ": echo differs from what was sent");
              }
            }
            if (absl::Status s = c->shutdown_write(); !s.ok()) {
              return fail("shutdown_write: " + text(s));
            }
            char extra;
            absl::StatusOr<std::size_t> eof = c->read(&extra, 1);
            if (!eof.ok() || *eof != 0) return fail("expected end of stream after the echo");
            ++verified;
            std::lock_guard lock(mu);
            --open;
          }));
        }
        for (auto& t : clients) t.join();
      },
      with_workers(workers(), /*watchdog=*/false));  // 10k fibers: reports would be noise
  const double secs = ms_since(t0) / 1000;
  EXPECT_EQ(failed.load(), 0) << first_error;
  EXPECT_EQ(connected.load(), kConns);
  EXPECT_EQ(max_open, kConns) << "every connection should have been open at the same time";
  EXPECT_EQ(verified.load(), kConns);
  EXPECT_EQ(child.stop_and_wait(kSanitized ? 120s : 30s), "");
  RecordProperty("seconds", std::to_string(secs));
}
}  // namespace
