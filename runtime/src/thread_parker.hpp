// ThreadParker: how a plain (non-fiber) thread waits in park(): a futex word per thread.
// States: 0 idle, 1 parked, 2 woken. wake() may arrive before the thread reaches the futex; the
// word then already says 2 and the wait returns at once.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::detail {

class ThreadParker {
 public:
  void park(bool (*commit)(void*), void* arg);
  void wake() noexcept;
  static ThreadParker& current() noexcept;

 private:
  std::atomic<std::uint32_t> state_{0};
};

// Plain threads blocked in park() right now (deadlock detection: they cannot wake anyone).
std::int64_t foreign_threads_blocked() noexcept;

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept;
void futex_wake(std::atomic<std::uint32_t>* word, int count) noexcept;

}  // namespace weft::detail
