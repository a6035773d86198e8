// The epoll poller on a kernel without epoll_pwait2 (before Linux 5.11, or under valgrind and
// seccomp sandboxes that do not know it): it falls back to epoll_wait, with its timeout rounded
// up to whole milliseconds so that no timer is polled for before it is due. A seccomp filter in
// a child process makes epoll_pwait2 fail with ENOSYS, as such a kernel does; the child then runs
// traffic, a sleep and a read deadline through the fallback. (Regression: the poller aborted with
// "epoll_pwait2 failed: Function not implemented".)
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using namespace weft_test;
using namespace weft_net_test;

class EpollFallbackTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(EpollFallbackTest);

// This thread, and every thread it starts from now on, gets ENOSYS from epoll_pwait2.
bool deny_epoll_pwait2() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_epoll_pwait2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Exit codes: 0 passed; 3 the filter could not be installed; 4 the filter did not take; 5 the
// traffic, the sleep or the deadline went wrong (the child prints which).
TEST_P(EpollFallbackTest, ThePollerServesTrafficAndTimersWithoutEpollPwait2) {
  weft::Options o = opts();
  o.netpoll = weft::NetPoll::kEpoll;
  EXPECT_EXIT(
      {
        if (!deny_epoll_pwait2()) std::_Exit(3);
        if (syscall(SYS_epoll_pwait2, -1, nullptr, 0, nullptr, nullptr, 0) != -1 ||
            errno != ENOSYS) {
          std::_Exit(4);
        }
        const bool ok = weft::run(
            [] {
              TcpPair p = tcp_pair();
              for (int i = 0; i < 100; ++i) {
                if (!p.client.write_all("ping").ok()) return false;
                absl::StatusOr<std::string> got = read_exactly(p.server, 4);
                if (!got.ok() || *got != "ping") return false;
              }
              const auto t0 = std::chrono::steady_clock::now();
              weft::this_fiber::sleep_for(5ms);
              if (std::chrono::steady_clock::now() - t0 < 5ms) return false;
              p.client.set_read_deadline(std::chrono::steady_clock::now() + 20ms);
              char buf[8];
              return p.client.read(buf, sizeof buf).status().code() ==
                     absl::StatusCode::kDeadlineExceeded;
            },
            o);
        std::_Exit(ok ? 0 : 5);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
