// Plain-thread parking and futex helpers; design in thread_parker.hpp.
#include "core/thread_parker.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "weft/detail/park.hpp"

namespace weft::detail {
namespace {
std::atomic<std::int64_t> g_blocked{0};
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futex_wait_until(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::int64_t deadline_ns) noexcept {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time (= steady_clock on Linux).
  timespec ts{static_cast<time_t>(deadline_ns / 1000000000),
              static_cast<long>(deadline_ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_BITSET_PRIVATE, expected,
          &ts, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void futex_wake(std::atomic<std::uint32_t>* word, int count) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr,
          nullptr, 0);
}

ThreadParker& ThreadParker::current() noexcept {
  static thread_local ThreadParker parker;
  return parker;
}

void ThreadParker::park(bool (*commit)(void*), void* arg) {
  // Counted as blocked from before the Waker is published until a waker flips the state: a
  // thread that was woken but not yet scheduled must not look blocked to deadlock detection.
  g_blocked.fetch_add(1, std::memory_order_acq_rel);
  state_.store(1, std::memory_order_seq_cst);
  if (!commit(arg)) {
    state_.store(0, std::memory_order_relaxed);
    g_blocked.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  while (state_.load(std::memory_order_acquire) == 1) futex_wait(&state_, 1);
  state_.store(0, std::memory_order_relaxed);
}

void ThreadParker::park_until(bool (*commit)(void*), void* arg, std::int64_t deadline_ns,
                              bool (*timed_out)(void*), void* timeout_arg) {
  state_.store(3, std::memory_order_seq_cst);
  if (!commit(arg)) {
    state_.store(0, std::memory_order_relaxed);
    return;
  }
  bool deadline_passed = false;
  for (;;) {
    const std::uint32_t s = state_.load(std::memory_order_acquire);
    if (s == 2) break;
    if (!deadline_passed) {
      if (now_ns() < deadline_ns) {
        futex_wait_until(&state_, s, deadline_ns);
        continue;
      }
      deadline_passed = true;
      if (timed_out(timeout_arg)) break;  // the timeout won: no wake() will come
      // Lost to a waker that already claimed us: its wake() is on the way.
    }
    futex_wait(&state_, s);
  }
  state_.store(0, std::memory_order_relaxed);
}

void ThreadParker::wake() noexcept {
  if (state_.exchange(2, std::memory_order_acq_rel) == 1) {
    g_blocked.fetch_sub(1, std::memory_order_acq_rel);
  }
  futex_wake(&state_, 1);
}

std::int64_t foreign_threads_blocked() noexcept {
  return g_blocked.load(std::memory_order_acquire);
}

}  // namespace weft::detail
