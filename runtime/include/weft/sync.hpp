// Fiber-aware synchronization: Mutex, CondVar, WaitGroup, Semaphore, RWMutex, Once, Barrier, and
// FiberLocal (a value per fiber). Waits that take a CancelToken (a Context converts to one) or a
// timeout give up when it fires; see weft/cancel.hpp for what that guarantees. The primitives park
// fibers, never kernel threads (WaitGroup and Semaphore also accept plain threads, which then
// block). All are built on one WaitList + SpinLock pair; see runtime/src/sync/ for the algorithms.
#pragma once

#include <absl/status/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <utility>

#include "weft/cancel.hpp"
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
  // Bounded: OK with the lock held, or (without it) kCancelled / kDeadlineExceeded.
  absl::Status lock(const CancelToken& bound);
  bool try_lock_until(std::chrono::steady_clock::time_point t) {
    return lock(CancelToken::until(t)).ok();
  }
  template <class Rep, class Period>
  bool try_lock_for(std::chrono::duration<Rep, Period> d) {
    return lock(CancelToken::after(d)).ok();
  }

 private:
  absl::Status lock_slow(const CancelToken* bound);
  void unlock_slow();
  void wake_waiter(std::uint32_t seen);
  void pass_woken_turn();
  void after_waiter_withdrew() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_);
  // Locked, waiters queued, a woken waiter on its way, starvation mode (runtime/src/sync/sync.cpp).
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
  requires std::is_invocable_r_v<bool, Pred&>
  void wait(std::unique_lock<Mutex>& lock, Pred pred) {
    while (!pred()) wait(lock);
  }
  // Bounded: returns OK when notified, else kCancelled / kDeadlineExceeded; either way the lock
  // is held again on return.
  absl::Status wait(std::unique_lock<Mutex>& lock, const CancelToken& bound);
  // OK once pred() holds; the bound's status if it fired first (pred() is false then).
  template <class Pred>
  requires std::is_invocable_r_v<bool, Pred&> absl::Status wait(std::unique_lock<Mutex>& lock,
                                                                const CancelToken& bound,
                                                                Pred pred) {
    while (!pred()) {
      absl::Status s = wait(lock, bound);
      if (!s.ok()) return pred() ? absl::OkStatus() : s;
    }
    return absl::OkStatus();
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
  // Bounded (fibers only): OK once the counter is zero, else kCancelled / kDeadlineExceeded.
  absl::Status wait(const CancelToken& bound);

 private:
  // Counts the caller as a waiter unless the counter is zero (false: do not wait).
  bool count_waiter_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_);
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
  // Bounded (fibers only): OK with a permit, else kCancelled / kDeadlineExceeded and no permit.
  absl::Status acquire(const CancelToken& bound);
  bool try_acquire_until(std::chrono::steady_clock::time_point t) {
    return acquire(CancelToken::until(t)).ok();
  }
  template <class Rep, class Period>
  bool try_acquire_for(std::chrono::duration<Rep, Period> d) {
    return acquire(CancelToken::after(d)).ok();
  }
  std::int64_t available() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> count_;
  detail::SpinLock guard_;
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

// A reusable barrier for a fixed party of `count` (std::barrier without a completion step):
// arrive_and_wait() parks until `count` callers have arrived in the current phase, then releases
// them all and starts the next phase. arrive_and_drop() arrives and leaves the party for good.
// Works from fibers and plain threads (bounded waits need a fiber).
class Barrier {
 public:
  explicit Barrier(std::size_t count);  // std::invalid_argument if count == 0
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;

  void arrive_and_wait();
  // Bounded: OK once the phase completed; else kCancelled / kDeadlineExceeded, and the caller's
  // arrival is taken back (the phase still needs it).
  absl::Status arrive_and_wait(const CancelToken& bound);
  void arrive_and_drop();

 private:
  // Resets the count and unlinks the phase's waiters (granted) for wake_chain.
  detail::WaitNode* complete_phase_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_);
  detail::SpinLock guard_;
  std::size_t expected_ ABSL_GUARDED_BY(guard_);
  std::size_t arrived_ ABSL_GUARDED_BY(guard_) = 0;
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

class RWMutex;
namespace detail {
struct RWReaderSlots;  // rw_mutex.cpp: one reader count per worker, each on its own cache line
bool rw_mutex_readers_spread(const RWMutex& mu) noexcept;  // for tests: spread_ is set
}  // namespace detail

// A reader/writer mutex (Go's sync.RWMutex): any number of readers or one writer. Writer-
// preferring, as Go's: once a writer waits, new readers queue behind it, so a stream of readers
// cannot starve it; when a writer unlocks, the readers that queued meanwhile all get in before the
// next writer, so writers cannot starve readers either. Not recursive (a reader that takes the
// read lock again while a writer waits deadlocks, as in Go). Needs a fiber to wait; works with
// std::unique_lock, std::lock_guard and std::shared_lock. Unlocking what is not held throws
// std::logic_error; once the read side is spread (below), a surplus unlock_shared() with no
// writer around is found by the next writer, which aborts with a message saying so.
//
// Readers on several workers: Go's RWMutex counts readers in one word, so two cores reading at
// once pass that cache line back and forth on every lock and unlock. Once readers on a
// multi-worker runtime are seen to overlap (kSpreadAfterOverlaps times), this one moves its
// reader count to one counter per worker, each on its own cache line (64 bytes per worker,
// allocated then, freed with the mutex): a read section then touches only its worker's line and
// reads the state word, which stays shared in every core's cache until a writer comes. Writers pay
// for it: they sum the counters (one cache miss per worker).
class RWMutex {
 public:
  RWMutex() = default;
  RWMutex(const RWMutex&) = delete;
  RWMutex& operator=(const RWMutex&) = delete;
  ~RWMutex();

  // Overlapping read sections (on a runtime with more than one worker) after which the reader
  // count is spread over per-worker counters.
  static constexpr std::uint32_t kSpreadAfterOverlaps = 64;

  void lock();
  bool try_lock() noexcept;
  void unlock();
  // The read side's fast paths are inline (Go's RLock/RUnlock are too): an add and a CAS on the
  // word, or once spread an out-of-line call that adds to the worker's counter. Kept out of
  // line, the call, the frame and the fiber check sat between a reader's two adds, and under
  // read-mostly contention every cycle there is a chance for the other core to take the line.
  void lock_shared() {
    if (!detail::in_fiber()) [[unlikely]]
      detail::require_fiber("weft::RWMutex::lock_shared()");
    if (detail::RWReaderSlots* spread = spread_.load(std::memory_order_acquire)) {
      lock_shared_spread(spread);
      return;
    }
    const std::uint64_t s = state_.fetch_add(kReader, std::memory_order_acquire);
    // A writer holds or waits, the count was just spread, or another reader is inside.
    if (s & (kWriter | kWriterWaiting | kSpread | kReaderMask)) [[unlikely]]
      lock_shared_contended(s);
  }
  bool try_lock_shared() noexcept;
  void unlock_shared() {
    if (detail::RWReaderSlots* spread = spread_.load(std::memory_order_acquire)) {
      unlock_shared_spread(spread);
      return;
    }
    release_word_count();
  }

 private:
  friend bool detail::rw_mutex_readers_spread(const RWMutex& mu) noexcept;
  // unlock_shared for a count in the word (also a reader backing out of its add there). A CAS,
  // not an add, so that it never subtracts from a spread word: after the spread the count is
  // left through a counter, where unlock_shared_spread keeps the mutex alive until it is done.
  // (Contention on the word is what spreads it, so the CAS rarely meets any.)
  void release_word_count() {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    do {
      if (s & kSpread) [[unlikely]] {
        unlock_shared_after_spread();
        return;
      }
    } while (!state_.compare_exchange_weak(s, s - kReader, std::memory_order_release,
                                           std::memory_order_relaxed));
    const std::uint64_t had = s >> kReaderShift;
    // Not held (had == 0), or the last reader out while a writer waits: the slow path.
    if (had == 0 || (had == 1 && (s & kWriterWaiting))) [[unlikely]]
      unlock_shared_slow(s);
  }
  // High 32 bits: readers holding the lock counted here, in units of kReader (above the flags,
  // so that one fetch_sub cannot borrow from them even on misuse). Low bits, flags: kWriter (a
  // writer holds it), kWriterWaiting (writers_ is non-empty, or a writer under guard_ is
  // counting readers: new readers must queue), kReadersWaiting (readers_ is non-empty: the
  // writer's unlock must release them), kSpread (set once, with spread_: readers count in the
  // per-worker counters). The flags change only under guard_ (kWriter also by the writer's
  // fast-path CAS); a reader's fast path adds to the word and CASes it back, a writer CASes it.
  static constexpr std::uint64_t kWriter = 1;
  static constexpr std::uint64_t kWriterWaiting = 2;
  static constexpr std::uint64_t kReadersWaiting = 4;
  static constexpr std::uint64_t kSpread = 8;
  static constexpr int kReaderShift = 32;
  static constexpr std::uint64_t kReader = 1ull << kReaderShift;
  static constexpr std::uint64_t kReaderMask = ~(kReader - 1);

  void lock_slow();
  void unlock_slow();
  void lock_shared_contended(std::uint64_t seen);  // the add saw a writer or another reader
  void lock_shared_slow();
  void unlock_shared_slow(std::uint64_t seen);  // seen: the word before this reader's sub
  bool try_lock_shared_spread(detail::RWReaderSlots* spread) noexcept;  // backs out on failure
  void lock_shared_spread(detail::RWReaderSlots* spread);
  void unlock_shared_spread(detail::RWReaderSlots* spread);
  void unlock_shared_after_spread();  // release_word_count found the word spread
  void hand_off_if_last_reader();
  bool try_lock_spread() noexcept;
  void note_overlap();
  // The word's count (from s) plus the counters: readers inside once a writer is announced.
  std::int64_t readers_sum(std::uint64_t s) const;
  std::int64_t readers_inside(std::uint64_t s) const;  // readers_sum; aborts if negative
  bool surplus_while_writer_holds();
  std::uint64_t grant_readers(std::uint64_t s, std::uint64_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_);
  void after_writer_withdrew();
  std::atomic<std::uint64_t> state_{0};
  std::atomic<std::uint32_t> overlaps_{0};  // lock_shared saw another reader inside; until spread
  detail::SpinLock guard_;
  // Set once, under guard_, before kSpread; never cleared while the mutex lives.
  std::atomic<detail::RWReaderSlots*> spread_{nullptr};
  detail::WaitList readers_ ABSL_GUARDED_BY(guard_);
  detail::WaitList writers_ ABSL_GUARDED_BY(guard_);
};

// Go's sync.Once, with exceptions: call(f) runs f in the first caller; callers that come while it
// runs park until it returns. If f throws, the exception reaches the caller that ran it, the Once
// stays not-done, and the next waiting (or later) caller runs f again. Once done, call() is one
// acquire load. Needs a fiber to wait. f calling call() on the same Once throws
// std::logic_error instead of deadlocking.
class Once {
 public:
  Once() = default;
  Once(const Once&) = delete;
  Once& operator=(const Once&) = delete;

  template <class F>
  void call(F&& f) {
    if (state_.load(std::memory_order_acquire) == kDone) return;
    if (!enter()) return;
    try {
      std::forward<F>(f)();
    } catch (...) {
      leave(false);
      throw;
    }
    leave(true);
  }
  bool done() const noexcept { return state_.load(std::memory_order_acquire) == kDone; }

 private:
  static constexpr std::uint32_t kIdle = 0, kRunning = 1, kDone = 2;
  bool enter();         // true: the caller runs f; false: it is done (waited if running)
  void leave(bool ok);  // after f: done, or back to idle; wakes the waiters
  std::atomic<std::uint32_t> state_{kIdle};
  detail::SpinLock guard_;
  std::uint64_t runner_ ABSL_GUARDED_BY(guard_) = 0;  // fiber id of the caller running f
  detail::WaitList waiters_ ABSL_GUARDED_BY(guard_);
};

namespace detail {
// FiberLocal's untyped storage (sched/fiber_locals.cpp): slot `index` of the calling fiber.
std::size_t fiber_local_new_index() noexcept;
void* fiber_local_get(std::size_t index);  // null if unset; std::logic_error outside a fiber
void fiber_local_set(std::size_t index, void* value, void (*destroy)(void*));
}  // namespace detail

// A value per fiber (Boost.Fiber's fiber_specific_ptr, Tokio's task_local): get() returns the
// calling fiber's own T, value-initialised on its first get(), and destroyed when that fiber ends
// (after its function returns or unwinds, on its own stack). Unlike thread_local it follows the
// fiber when it migrates between kernel threads. get() outside a fiber throws std::logic_error.
// A FiberLocal may be destroyed while fibers still hold values of it: those are destroyed when
// their fibers end. Request ids, trace spans, per-fiber caches.
template <class T>
class FiberLocal {
 public:
  FiberLocal() : index_(detail::fiber_local_new_index()) {}
  FiberLocal(const FiberLocal&) = delete;
  FiberLocal& operator=(const FiberLocal&) = delete;

  T& get() {
    if (void* p = detail::fiber_local_get(index_)) return *static_cast<T*>(p);
    T* value = new T();
    detail::fiber_local_set(index_, value, [](void* p) { delete static_cast<T*>(p); });
    return *value;
  }

 private:
  std::size_t index_;
};

}  // namespace weft
