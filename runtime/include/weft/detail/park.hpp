// The one parking protocol that every weft primitive (sync, channels, netpoll) is built on.
//
//   park(commit, arg):  the caller (a fiber, or a plain thread) stops running. For a fiber, its
//                       context is saved and only THEN does `commit(arg)` run, on another stack.
//                       commit typically enqueues or publishes a Waker and releases the lock that
//                       guards it. If commit returns false the park is abandoned and the caller
//                       continues at once.
//   Waker::wake():      makes the parked caller runnable again. A waker can only find the Waker
//                       after commit published it, so it can never see a fiber that is "parked"
//                       but still running on its stack: no wake-up is lost and none is early.
//
// Each park is matched by exactly one wake(). Primitives that can be woken by several sources
// (a value and a timeout) decide the single winner under their own lock, or with a CAS.
//
// Shutdown: when run()'s main fiber returns, fibers still parked are resumed one by one and park()
// throws FiberUnwind in them, so their destructors run. The primitive that called park() must
// catch it, take its own lock, withdraw its wait record (or give back what a racing waker granted)
// and rethrow. park() also throws FiberUnwind at entry during shutdown; the caller still holds its
// lock then, and commit has not run.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <cstdint>

namespace weft::detail {

struct Fiber;
class ThreadParker;

// Thrown through a fiber's frames to unwind it at shutdown. Not a std::exception, so
// `catch (const std::exception&)` does not swallow it; a `catch (...)` must rethrow it.
struct FiberUnwind {};

// What a parked fiber waits on; shown by dump_fibers(). `arg` refines it (an fd, a timeout).
enum class WaitReason : std::uint8_t {
  kNone,
  kMutex,
  kCondVar,
  kWaitGroup,
  kSemaphore,
  kJoin,
  kSleep,
  kBlocking,
  kChanRecv,
  kChanSend,
  kSelect,
  kIoRead,
  kIoWrite,
  kForever,
  kRWMutex,
  kOnce,
  kBarrier,
};
const char* wait_reason_name(WaitReason r) noexcept;

// Who to wake: a fiber, or a plain (non-fiber) thread blocked in park(). Trivially copyable, so
// wait records can hold it by value.
class Waker {
 public:
  Waker() = default;
  static Waker current();  // the calling fiber, else the calling thread's parker
  void wake() const;       // see the protocol above; callable from any thread
  bool empty() const noexcept { return bits_ == 0; }
  Fiber* fiber() const noexcept { return (bits_ & 1) ? nullptr : reinterpret_cast<Fiber*>(bits_); }
  friend bool operator==(Waker a, Waker b) noexcept { return a.bits_ == b.bits_; }
  // For lock-free slots that hold a Waker in one word (netpoll). Bits are never 0, 1, 2 or 3
  // (objects are aligned), so a slot may use those as its own states.
  std::uintptr_t bits() const noexcept { return bits_; }
  static Waker from_bits(std::uintptr_t bits) noexcept { return Waker(bits); }

 private:
  explicit Waker(std::uintptr_t bits) : bits_(bits) {}
  std::uintptr_t bits_ = 0;  // Fiber*, or ThreadParker* | 1
};

using CommitFn = bool (*)(void* arg);
void park(CommitFn commit, void* arg, WaitReason reason, std::int64_t reason_arg = -1);

// Plain threads only (fibers use runtime Timers): park() with a deadline. If no wake() has come
// by deadline_ns (steady clock), timed_out(timeout_arg) runs on the parked thread: it returns
// true when it made sure that no wake() will come (it won the primitive's CAS), and park returns;
// false means a waker already claimed the thread, which then waits for that wake().
void thread_park_until(CommitFn commit, void* arg, std::int64_t deadline_ns, CommitFn timed_out,
                       void* timeout_arg);

// The cooperative budget (Tokio's coop): a call that could have parked but completed at once (a
// read that found data, a write the kernel took whole) counts one operation. After kCoopBudget
// of them in a row without parking, the fiber yields, so a connection whose socket is always
// ready (a pipelining client) cannot hold its worker. A park starts a new run. Outside a fiber
// it does nothing. Like any yield it may throw FiberUnwind at shutdown.
inline constexpr std::uint32_t kCoopBudget = 128;
void coop_tick();

// True when called from a fiber of a running runtime.
bool in_fiber() noexcept;
// Throws std::logic_error("weft: <what> needs a fiber ...") outside a fiber.
void require_fiber(const char* what);

// Monotonic clock (steady_clock) in nanoseconds.
std::int64_t now_ns() noexcept;

// A one-shot timer on the runtime's timer heap. The record lives in the caller's memory (usually a
// parked fiber's frame) and must stay alive until it fired or timer_cancel() returned.
struct TimerEntry {
  std::int64_t when_ns = 0;
  void (*fire)(TimerEntry*) =
      nullptr;                   // runs on a worker, outside any fiber; must not block or park
  std::int32_t heap_index = -1;  // position in the heap, -1 when not armed; heap lock
  // Nothing else: once `fire` has run, the heap never touches the record again, because the
  // callback may have woken the fiber whose frame holds it (sleep, select timeouts), and that
  // fiber may already be reusing the memory.
};
// Arms `t`. Requires a running runtime (throws std::logic_error otherwise).
void timer_add(TimerEntry* t);
// Disarms `t`. Returns true if it was still pending (it will never fire); false if it already
// fired; if it is firing right now, waits until `fire` has returned.
bool timer_cancel(TimerEntry* t) noexcept;

// ---- park_unlocking: the park of every lock-based primitive ----------------------------------
//
// Go's goparkunlock, with the shutdown path written once. The caller holds `lock` and has
// published its wait record under it (queued a node, say). The park's commit -- which runs once
// the caller is parked -- arms `timer` if given, releases `lock`, then runs `after_unlock()`
// (CondVar releases the user's mutex there, outside the spin lock). A waker needs `lock` to find
// the record, so it can never wake the caller early. Returns after the wake, with `lock` released
// (a timer is the caller's to cancel). `after_unlock` runs when the caller may already have been
// woken: it is copied out of the caller's frame first and must only touch what the caller cannot
// free before it ran (CondVar: the mutex, which the woken caller must re-acquire).
//
// Shutdown: if park() throws FiberUnwind -- at entry (lock still held, nothing armed) or after
// the commit -- the timer is cancelled (without the lock: its callback may need it), the lock is
// (re)taken, `withdraw(parked)` runs with it held to unlink the record or give back what a racing
// waker granted, the lock is released, and FiberUnwind propagates.
//
// `lock` must outlive the park (it belongs to the primitive, not to the caller's frame): after
// the commit released it, the caller may return at once. A `timer`'s callback must take `lock`
// before it wakes the caller, as every other waker does. Lock: lock() and unlock().
// (Lock-free primitives -- PollDesc's slot, join -- publish with a CAS in a commit of their own
// and call park() directly; select holds a set of channel locks that lives in its frame and
// keeps its own commit, see channels/src/select.cpp.)
struct NoParkHook {
  void operator()() const noexcept {}
};

// (Clang's thread-safety analysis sees the release of `lock`; the body, whose commit unlocks
// through a void*, is not analysed. A withdraw lambda says ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock).)
template <class Lock, class Withdraw, class AfterUnlock = NoParkHook>
void park_unlocking(Lock& lock, WaitReason reason, Withdraw&& withdraw,
                    AfterUnlock after_unlock = {}, TimerEntry* timer = nullptr,
                    std::int64_t reason_arg = -1)
    ABSL_UNLOCK_FUNCTION(lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  struct Commit {
    Lock* lock;
    TimerEntry* timer;
    AfterUnlock* after_unlock;
    bool committed;
    static bool run(void* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      auto* c = static_cast<Commit*>(a);
      // Everything is read before the unlock: after it the caller may resume and return.
      Lock* const l = c->lock;
      AfterUnlock after = *c->after_unlock;
      c->committed = true;
      if (c->timer) timer_add(c->timer);
      l->unlock();
      after();
      return true;
    }
  } commit{&lock, timer, &after_unlock, false};
  try {
    park(&Commit::run, &commit, reason, reason_arg);
  } catch (const FiberUnwind&) {
    if (commit.committed) {
      if (timer) timer_cancel(timer);
      lock.lock();
    }
    withdraw(commit.committed);
    lock.unlock();
    throw;
  }
}

}  // namespace weft::detail
