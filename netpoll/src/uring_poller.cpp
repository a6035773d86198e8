// The io_uring poller and the backend choice; design in uring_poller.hpp.
#include "uring_poller.hpp"

#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "epoll_poller.hpp"
#include "poll_desc.hpp"
#include "poll_op.hpp"
#include "weft/detail/assert.hpp"
#include "weft/runtime.hpp"

namespace weft::net::detail {
namespace {

// Submission queue entries; the completion queue holds 4x as many (NODROP covers the rest).
// $WEFT_URING_ENTRIES changes it (tests make the ring tiny to exercise full queues).
constexpr unsigned kDefaultEntries = 4096;
constexpr unsigned kFlushBatch = 32;  // queued SQEs that are submitted at once
constexpr int kMaxEpollEvents = 256;
constexpr unsigned kReapBatch = 256;

[[noreturn]] void fatal(const char* what, int err) {
  std::fprintf(stderr, "weft: netpoll (io_uring): %s failed: %s\n", what, std::strerror(err));
  std::abort();
}

unsigned ring_entries() {
  const char* v = std::getenv("WEFT_URING_ENTRIES");
  if (!v || !*v) return kDefaultEntries;
  const unsigned long n = std::strtoul(v, nullptr, 10);
  return n >= 2 && n <= 32768 ? static_cast<unsigned>(n) : kDefaultEntries;
}

class UringPoller;
std::atomic<UringPoller*> g_active{nullptr};

class UringPoller final : public weft::detail::Poller, public UringRing {
 public:
  // Sets up the ring, or returns the errno that stopped it (and a note saying what is missing).
  static std::unique_ptr<UringPoller> create(bool coop, int* err, const char** missing) {
    auto p = std::unique_ptr<UringPoller>(new UringPoller());
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    if (coop) params.flags |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    const unsigned entries = ring_entries();
    params.cq_entries = entries * 4;
    if (const int r = io_uring_queue_init_params(entries, &p->ring_, &params); r < 0) {
      *err = -r;
      return nullptr;
    }
    p->initialised_ = true;
    const unsigned need = IORING_FEAT_NODROP | IORING_FEAT_EXT_ARG | IORING_FEAT_FAST_POLL;
    if ((params.features & need) != need) {
      *err = EINVAL;
      *missing = "the kernel's io_uring lacks NODROP, EXT_ARG or FAST_POLL (Linux 5.11+)";
      return nullptr;
    }
    // Synchronous cancellation (Linux 6.0, as is IORING_RECVSEND_POLL_FIRST, 5.19): a probe
    // for an operation that does not exist answers ENOENT where it is supported.
    io_uring_sync_cancel_reg reg{};
    reg.addr = kUringIgnoreToken - 1;
    reg.timeout.tv_sec = -1;
    reg.timeout.tv_nsec = -1;
    if (io_uring_register_sync_cancel(&p->ring_, &reg) != -ENOENT) {
      *err = EINVAL;
      *missing = "the kernel's io_uring lacks synchronous cancellation (Linux 6.0+)";
      return nullptr;
    }
    return p;
  }

  ~UringPoller() override {
    UringPoller* self = this;
    g_active.compare_exchange_strong(self, nullptr);
    if (initialised_) io_uring_queue_exit(&ring_);
  }

  void activate() noexcept { g_active.store(this, std::memory_order_release); }

  void poll(std::int64_t timeout_ns, weft::detail::FiberList& ready) override {
    if (!epoll_armed_) {
      queue([](io_uring_sqe* sqe) {
        io_uring_prep_poll_multishot(sqe, epoll_instance(), POLLIN);
        io_uring_sqe_set_data64(sqe, kUringEpollToken);
      });
      epoll_armed_ = true;
    }
    if (timeout_ns != 0 && io_uring_cq_ready(&ring_) == 0) {
      // Blocking: announce it first, so that a submitter queuing from now on submits by itself
      // (this wait would not pick its SQE up); then submit what is queued and wait.
      blocked_.store(true, std::memory_order_seq_cst);
      flush();
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts{};
      if (timeout_ns > 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
      }
      const int r = io_uring_wait_cqes(&ring_, &cqe, 1, timeout_ns > 0 ? &ts : nullptr, nullptr);
      blocked_.store(false, std::memory_order_relaxed);
      if (r < 0 && r != -ETIME && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
        fatal("io_uring_wait_cqes", -r);
      }
    } else {
      flush();
    }
    reap(ready);
  }

  void wakeup() noexcept override { epoll_wakeup(); }
  std::size_t waiters() const noexcept override { return poll_waiters(); }
  const char* name() const noexcept override { return "io_uring"; }
  void flush() noexcept override { UringRing::flush(); }

  // UringRing
  io_uring_sqe* lock_sqe_impl() noexcept {
    sq_mu_.lock();
    for (;;) {
      if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) return sqe;
      submit_locked();  // full: hand the queue to the kernel, which frees its entries
    }
  }
  void unlock_queued_impl() noexcept {
    const unsigned pending = pending_.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (pending >= kFlushBatch || blocked_.load(std::memory_order_seq_cst)) submit_locked();
    sq_mu_.unlock();
  }
  void flush_impl() noexcept {
    if (pending_.load(std::memory_order_seq_cst) == 0) return;
    std::lock_guard lock(sq_mu_);
    submit_locked();
  }
  void cancel_now_impl(std::uint64_t user_data) noexcept {
    flush_impl();  // the operation may still sit in the queue
    io_uring_sync_cancel_reg reg{};
    reg.addr = user_data;
    reg.timeout.tv_sec = -1;
    reg.timeout.tv_nsec = -1;
    int r;
    do {
      r = io_uring_register_sync_cancel(&ring_, &reg);
    } while (r == -EINTR);
    // 0: cancelled; -ENOENT: it had completed already; -EALREADY cannot happen for a recv
    // waiting on its poll. Anything else would leave the kernel writing into a dying frame.
    if (r < 0 && r != -ENOENT) fatal("IORING_REGISTER_SYNC_CANCEL", -r);
  }

 private:
  UringPoller() = default;

  void submit_locked() noexcept {
    for (;;) {
      const int r = io_uring_submit(&ring_);
      if (r >= 0 || r == -EINTR) break;
      if (r == -EAGAIN || r == -EBUSY) {
        // The kernel is short of memory for requests, or its completion backlog is full: the
        // entries stay queued and go with the next submit (the poller reaps meanwhile).
        break;
      }
      fatal("io_uring_submit", -r);
    }
    pending_.store(io_uring_sq_ready(&ring_), std::memory_order_seq_cst);
  }

  void reap(weft::detail::FiberList& ready) {
    bool epoll_ready = false;
    io_uring_cqe* cqes[kReapBatch];
    for (;;) {
      const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kReapBatch);
      for (unsigned i = 0; i < n; ++i) {
        const io_uring_cqe* c = cqes[i];
        const std::uint64_t token = c->user_data;
        if (token == kUringEpollToken) {
          epoll_ready = true;
          if (!(c->flags & IORING_CQE_F_MORE)) epoll_armed_ = false;  // re-armed next poll
        } else if (token != kUringIgnoreToken) {
          poll_op_complete(token, c->res, ready);
        }
      }
      io_uring_cq_advance(&ring_, n);
      if (n < kReapBatch) break;
    }
    if (epoll_ready) {
      while (epoll_wait_dispatch(events_, kMaxEpollEvents, 0, ready) == kMaxEpollEvents) {
      }
    }
  }

  io_uring ring_{};
  bool initialised_ = false;
  std::mutex sq_mu_;                     // guards the SQ (liburing's producer side)
  std::atomic<unsigned> pending_{0};     // SQEs queued and not yet submitted
  std::atomic<bool> blocked_{false};     // a poll() waits in the kernel
  bool epoll_armed_ = false;             // poller seat only: the multishot poll on epoll is live
  epoll_event events_[kMaxEpollEvents];  // poller seat only
};

// Why io_uring_setup failed, for the message: what happened and what would change it.
std::string setup_failure(int err, const char* missing) {
  if (missing) return missing;
  std::string why = std::string("io_uring_setup: ") + std::strerror(err);
  int disabled = 0;
  std::ifstream("/proc/sys/kernel/io_uring_disabled") >> disabled;
  if (disabled == 2) {
    why += " (kernel.io_uring_disabled=2 turns io_uring off for everyone)";
  } else if (disabled == 1 && err == EPERM) {
    why += " (kernel.io_uring_disabled=1: only members of kernel.io_uring_group may use it)";
  } else if (err == ENOSYS) {
    why += " (the kernel has no io_uring, or a seccomp filter blocks it)";
  } else if (err == EPERM) {
    why += " (a seccomp filter or a security module forbids it)";
  } else if (err == ENOMEM) {
    why += " (RLIMIT_MEMLOCK is too small for the ring on this kernel)";
  }
  return why;
}

std::atomic<bool> g_reported_fallback{false};

}  // namespace

std::unique_ptr<weft::detail::Poller> make_netpoller(std::uint8_t choice, unsigned workers,
                                                     bool hibernation) {
  netpoll_prepare_process();
  const auto want = static_cast<weft::NetPoll>(choice);
  // auto: io_uring where it is the better backend, which is one worker (see "Task work" in
  // uring_poller.hpp) that does not hibernate stacks (see "Selection"); epoll otherwise.
  if (want == weft::NetPoll::kEpoll ||
      (want == weft::NetPoll::kAuto && (workers != 1 || hibernation))) {
    return make_epoll_poller();
  }
  int err = 0;
  const char* missing = nullptr;
  std::unique_ptr<UringPoller> p = UringPoller::create(/*coop=*/workers == 1, &err, &missing);
  if (p) {
    p->activate();
    return p;
  }
  const std::string why = setup_failure(err, missing);
  if (want == weft::NetPoll::kIoUring) {
    throw std::runtime_error(
        "weft: the io_uring netpoller was asked for ($WEFT_NETPOLL or "
        "Options::netpoll) but cannot run here: " +
        why + "; use epoll (WEFT_NETPOLL=epoll) or auto");
  }
  if (!g_reported_fallback.exchange(true)) {
    std::fprintf(stderr, "weft: netpoll: io_uring unavailable, using epoll: %s\n", why.c_str());
  }
  return make_epoll_poller();
}

io_uring_sqe* UringRing::lock_sqe() noexcept {
  return static_cast<UringPoller*>(this)->lock_sqe_impl();
}
void UringRing::unlock_queued() noexcept { static_cast<UringPoller*>(this)->unlock_queued_impl(); }
void UringRing::flush() noexcept { static_cast<UringPoller*>(this)->flush_impl(); }
void UringRing::cancel_now(std::uint64_t user_data) noexcept {
  static_cast<UringPoller*>(this)->cancel_now_impl(user_data);
}

UringRing* uring_ring() noexcept { return g_active.load(std::memory_order_acquire); }

}  // namespace weft::net::detail
