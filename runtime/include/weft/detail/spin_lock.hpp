// SpinLock: the lock that guards wait queues inside weft's primitives. Critical sections under it
// are a handful of pointer writes and never park; the one longer step is arming a timeout in a
// park's commit (the timer heap's mutex, maybe a poller wakeup), so spinning (with pause, then
// sched_yield) beats a kernel mutex. It is released by park()'s commit step, which may run on
// another fiber's stack: that is why it is not a std::mutex (which must be unlocked by its owner).
#pragma once

#include <atomic>

namespace weft::detail {

class SpinLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) contended();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  void contended() noexcept;  // waits until the lock looks free
  std::atomic<bool> locked_{false};
};

}  // namespace weft::detail
