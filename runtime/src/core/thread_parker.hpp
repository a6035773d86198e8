// ThreadParker: how a plain (non-fiber) thread waits in park(): a futex word per thread.
// States: 0 idle, 1 parked, 3 parked with a deadline, 2 woken. wake() may arrive before the
// thread reaches the futex; the word then already says 2 and the wait returns at once.
// Deadlock detection counts threads parked without a deadline only (one with a deadline will
// come back by itself); wake() uncounts a thread whose state it flips from 1.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::detail {

class ThreadParker {
 public:
  void park(bool (*commit)(void*), void* arg);
  // See thread_park_until() in park.hpp.
  void park_until(bool (*commit)(void*), void* arg, std::int64_t deadline_ns,
                  bool (*timed_out)(void*), void* timeout_arg);
  void wake() noexcept;
  static ThreadParker& current() noexcept;

 private:
  std::atomic<std::uint32_t> state_{0};
};

// Plain threads blocked in park() right now (deadlock detection: they cannot wake anyone).
std::int64_t foreign_threads_blocked() noexcept;

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept;
// Waits at most until deadline_ns (steady clock).
void futex_wait_until(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::int64_t deadline_ns) noexcept;
void futex_wake(std::atomic<std::uint32_t>* word, int count) noexcept;

}  // namespace weft::detail
