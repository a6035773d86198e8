// ThreadMutex: the kernel-thread mutex of the runtime's own bookkeeping (the idle-worker list,
// the timer heap, the stack pool, the blocking pool, the monitor) and of the netpoller's
// descriptor table. A std::mutex declared a capability so that clang's -Wthread-safety checks
// every ABSL_GUARDED_BY(mu_) field (libstdc++'s std::mutex and std::lock_guard carry no
// annotations; absl::Mutex does, but Debian's build of it is invisible to TSan, which then
// reports every field it guards as a race). Waits use std::condition_variable_any on the
// ThreadMutex itself. Never held across a park: fibers use SpinLock-guarded wait lists.
#pragma once

#include <absl/base/thread_annotations.h>

#include <mutex>

namespace weft::detail {

class ABSL_LOCKABLE ThreadMutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Scoped lock of a ThreadMutex (std::lock_guard with annotations).
class ABSL_SCOPED_LOCKABLE ThreadMutexLock {
 public:
  explicit ThreadMutexLock(ThreadMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_.lock();
  }
  ~ThreadMutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  ThreadMutexLock(const ThreadMutexLock&) = delete;
  ThreadMutexLock& operator=(const ThreadMutexLock&) = delete;

 private:
  ThreadMutex& mu_;
};

}  // namespace weft::detail
