// The epoll poller; design in epoll_poller.hpp.
#include "epoll_poller.hpp"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "poll_desc.hpp"
#include "uring_poller.hpp"
#include "weft/detail/fd_limit.hpp"
#include "weft/detail/poller.hpp"

namespace weft::net::detail {
namespace {

constexpr std::uint64_t kWakeToken = ~std::uint64_t{0};

[[noreturn]] void fatal(const char* what) {
  std::fprintf(stderr, "weft: netpoll: %s failed: %s\n", what, std::strerror(errno));
  std::abort();
}

struct Epoll {
  int epfd = -1;
  int wake_fd = -1;
  Epoll() {
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) fatal("epoll_create1");
    wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) fatal("eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = kWakeToken;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) fatal("epoll_ctl(eventfd)");
  }
};

// Set once epoll_pwait2 reported ENOSYS; epoll_wait serves from then on.
std::atomic<bool> no_pwait2{false};

Epoll& epoll_state() {
  static Epoll* e = new Epoll();  // lives for the process: fds may outlive any runtime
  return *e;
}

}  // namespace

int epoll_wait_dispatch(epoll_event* events, int max_events, std::int64_t timeout_ns,
                        weft::detail::FiberList& ready) {
  Epoll& e = epoll_state();
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000);
    tsp = &ts;
  }
  int n = -1;
  if (!no_pwait2.load(std::memory_order_relaxed)) {
    n = epoll_pwait2(e.epfd, events, max_events, tsp, nullptr);
    if (n < 0 && errno == ENOSYS) no_pwait2.store(true, std::memory_order_relaxed);
  }
  if (no_pwait2.load(std::memory_order_relaxed)) {
    // Kernels before 5.11, and valgrind, lack epoll_pwait2: epoll_wait's millisecond timeout,
    // rounded up so that a timer is never polled for before it is due.
    const std::int64_t ms = timeout_ns < 0 ? -1 : (timeout_ns + 999999) / 1000000;
    n = epoll_wait(e.epfd, events, max_events,
                   ms > INT32_MAX ? int{INT32_MAX} : static_cast<int>(ms));
  }
  if (n < 0) {
    if (errno == EINTR) return 0;
    fatal(no_pwait2.load(std::memory_order_relaxed) ? "epoll_wait" : "epoll_pwait2");
  }
  for (int i = 0; i < n; ++i) {
    const epoll_event& ev = events[i];
    if (ev.data.u64 == kWakeToken) {
      std::uint64_t drain;
      while (read(e.wake_fd, &drain, sizeof drain) > 0) {
      }
      continue;
    }
    PollDesc* pd = poll_from_token(ev.data.u64);
    if (!pd) continue;  // stale: the fd was closed since
    // Urgent data, end of stream or an error: a short read no longer proves the socket has
    // nothing more to read ("Short reads", poll_desc.hpp). Set before the wake publishes it.
    if (ev.events & (EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      pd->short_read_unreliable.store(true, std::memory_order_release);
    }
    if (ev.events & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      poll_ready(pd, Mode::kRead, ready);
    }
    if (ev.events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) poll_ready(pd, Mode::kWrite, ready);
  }
  return n;
}

void epoll_wakeup() noexcept {
  const std::uint64_t one = 1;
  ssize_t r;
  do {
    r = write(epoll_state().wake_fd, &one, sizeof one);
  } while (r < 0 && errno == EINTR);
}

namespace {

class EpollPoller final : public weft::detail::Poller {
 public:
  void poll(std::int64_t timeout_ns, weft::detail::FiberList& ready) override {
    epoll_wait_dispatch(events_, kMaxEvents, timeout_ns, ready);
  }
  void wakeup() noexcept override { epoll_wakeup(); }
  std::size_t waiters() const noexcept override { return poll_waiters(); }
  const char* name() const noexcept override { return "epoll"; }

 private:
  static constexpr int kMaxEvents = 256;
  epoll_event events_[kMaxEvents];  // only the one polling worker touches it
};

}  // namespace

void netpoll_prepare_process() {
  weft::detail::raise_fd_soft_limit();
  struct sigaction sa {};
  if (sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  epoll_state();
}

std::unique_ptr<weft::detail::Poller> make_epoll_poller() {
  return std::make_unique<EpollPoller>();
}

int epoll_instance() { return epoll_state().epfd; }

namespace {
// Here rather than in uring_poller.cpp: poll_desc.cpp references this file (epoll_instance), so
// a static library always links it, and with it the backend choice.
[[maybe_unused]] const bool g_installed = [] {
  weft::detail::set_poller_factory(&make_netpoller);
  return true;
}();
}  // namespace

}  // namespace weft::net::detail
