// Plain-thread parking and futex helpers; design in thread_parker.hpp.
#include "thread_parker.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace weft::detail {
namespace {
std::atomic<std::int64_t> g_blocked{0};
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
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

void ThreadParker::wake() noexcept {
  g_blocked.fetch_sub(1, std::memory_order_acq_rel);
  state_.store(2, std::memory_order_release);
  futex_wake(&state_, 1);
}

std::int64_t foreign_threads_blocked() noexcept {
  return g_blocked.load(std::memory_order_acquire);
}

}  // namespace weft::detail
