// Fiber-aware synchronization: Mutex, CondVar, WaitGroup, Semaphore. They park fibers, never
// kernel threads (WaitGroup and Semaphore also accept plain threads, which then block). All four
// are built on one WaitList + SpinLock pair; see runtime/src/sync/sync.cpp for the algorithms.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "weft/detail/deadline.hpp"
#include "weft/detail/spin_lock.hpp"
#include "weft/detail/wait_list.hpp"

namespace weft {

// A fiber mutex (Go's sync.Mutex). Not recursive. Waiters queue FIFO; a waiter that waited more
// than 1 ms gets the lock handed to it directly (Go's starvation mode), so nobody starves.
// lock() needs a fiber; works with std::lock_guard, std::unique_lock and std::scoped_lock.
class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() = default;

  void lock();
  bool try_lock() noexcept;
  void unlock();

 private:
  void lock_slow();
  void unlock_slow();
  // bit 0: locked; bit 1: waiters queued (unlock must look at the queue)
  std::atomic<std::uint32_t> state_{0};
  detail::SpinLock guard_;  // guards waiters_
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

// A condition variable for weft::Mutex. Spurious wake-ups do not happen, but use a predicate
// anyway.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void wait(std::unique_lock<Mutex>& lock);
  template <class Pred>
  void wait(std::unique_lock<Mutex>& lock, Pred pred) {
    while (!pred()) wait(lock);
  }
  std::cv_status wait_until(std::unique_lock<Mutex>& lock,
                            std::chrono::steady_clock::time_point deadline);
  template <class Pred>
  bool wait_until(std::unique_lock<Mutex>& lock, std::chrono::steady_clock::time_point deadline,
                  Pred pred) {
    while (!pred()) {
      if (wait_until(lock, deadline) == std::cv_status::timeout) return pred();
    }
    return true;
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<Mutex>& lock, std::chrono::duration<Rep, Period> d) {
    return wait_until(lock, detail::deadline_after(d));
  }
  template <class Rep, class Period, class Pred>
  bool wait_for(std::unique_lock<Mutex>& lock, std::chrono::duration<Rep, Period> d, Pred pred) {
    return wait_until(lock, detail::deadline_after(d), std::move(pred));
  }
  void notify_one();
  void notify_all();

 private:
  detail::SpinLock guard_;
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

// Go's sync.WaitGroup. add()/done() from anywhere; wait() from a fiber or a plain thread. The
// WaitGroup may be destroyed as soon as wait() returns: the done() that reaches zero never
// touches it after waking the waiters.
class WaitGroup {
 public:
  WaitGroup() = default;
  WaitGroup(const WaitGroup&) = delete;
  WaitGroup& operator=(const WaitGroup&) = delete;

  void add(std::int64_t n = 1);  // throws std::logic_error if the counter goes negative
  void done() { add(-1); }
  void wait();

 private:
  // high 32 bits: counter; low 32 bits: number of waiters (as in Go)
  std::atomic<std::uint64_t> state_{0};
  detail::SpinLock guard_;
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

// A counting semaphore. acquire() parks a fiber (or blocks a plain thread) until a permit is free;
// release(n) hands permits to waiters in FIFO order.
class Semaphore {
 public:
  explicit Semaphore(std::int64_t initial);
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  void acquire();
  bool try_acquire() noexcept;
  void release(std::int64_t n = 1);
  std::int64_t available() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> count_;
  detail::SpinLock guard_;
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

}  // namespace weft
