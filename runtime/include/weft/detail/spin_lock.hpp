// SpinLock: the lock that guards wait queues inside weft's primitives. Critical sections under it
// are a handful of pointer writes and never park; the one longer step is arming a timeout in a
// park's commit (the timer heap's mutex, maybe a poller wakeup), so spinning (with pause, then
// sched_yield) beats a kernel mutex. It is released by park()'s commit step, which may run on
// another fiber's stack: that is why it is not a std::mutex (which must be unlocked by its owner).
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>

namespace weft::detail {

// A capability for clang's -Wthread-safety: fields it guards say ABSL_GUARDED_BY(lock).
class ABSL_LOCKABLE SpinLock {
 public:
  void lock() noexcept ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    while (locked_.exchange(true, std::memory_order_acquire)) contended();
  }
  bool try_lock() noexcept ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  void contended() noexcept;  // waits until the lock looks free
  std::atomic<bool> locked_{false};
};

}  // namespace weft::detail
