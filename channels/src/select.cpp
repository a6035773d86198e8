// select: Go's selectgo over the type-erased core (design of the core in chan_core.hpp).
//
//  1. Poll order: a uniformly random permutation of the channel cases, so that among several
//     ready cases each is chosen with equal probability (also when one channel appears twice).
//     It is drawn lazily, one Fisher-Yates step per case the fast pass reaches.
//  2. Lock order: the distinct channels sorted by address, so that two selects (and plain ops,
//     which hold one lock) can never deadlock.
//  3. Poll the cases in poll order, first each under its own lock (cheap when one is ready), then
//     with every lock held; the first that can proceed runs.
//     Otherwise: default returns; a timeout already due returns; else one waiter per case is
//     queued, all sharing one SelectWait whose `fired` is won by CAS (a peer's claim_waiter(),
//     close(), or the timeout timer), and the caller parks. The commit arms the timeout timer,
//     then releases the locks in lock order.
//  4. After waking, the caller re-takes every lock and unlinks its losing waiters. Re-locking is
//     also what keeps this frame alive for the commit: a waker may resume us while the commit is
//     still releasing later locks (reading them from this frame); we cannot get past the re-lock
//     until the commit released the last one, after which it touches nothing of ours.
//
// Source cases (kSource: a socket's readiness, netpoll's case_readable / case_writable) are not
// channels and take no lock. They are checked with ready_now() after the channels' fast pass.
// To wait, the commit arms each source with a SelectHook from this frame (a source already ready
// fires its hook at once); a source that becomes ready calls select_hook_fire, which claims
// `fired` by the same CAS as a channel peer. The commit's arming reads this frame after a hook
// may have woken us, so with sources the caller waits until the commit marked itself done; then
// it disarms every armed source (which waits for a fire in progress) before it leaves.
#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include "chan_core.hpp"
#include "weft/detail/fast_rand.hpp"
#include "weft/detail/spin_wait.hpp"

namespace weft::detail {
namespace {

// Small selects keep their bookkeeping on the stack.
template <class T, std::size_t kInline = 8>
class Scratch {
 public:
  explicit Scratch(std::size_t n) : data_(n <= kInline ? inline_ : (heap_ = new T[n])) {}
  ~Scratch() { delete[] heap_; }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  T* data() noexcept { return data_; }

 private:
  T inline_[kInline];
  T* heap_ = nullptr;
  T* data_;
};

// The lock set of one select: every distinct channel, locked in address order. Clang's analysis
// cannot follow a run-time set of locks, so the functions that take it are not analysed; what
// they touch under it is the same as the analysed send_locked/recv_locked (chan_core.hpp).
struct Locks {
  ChanCore** chans;  // distinct, in address order
  std::size_t n;
  void lock() const noexcept ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (std::size_t i = 0; i < n; ++i) chans[i]->lock.lock();
  }
  void unlock() const noexcept ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (std::size_t i = 0; i < n; ++i) chans[i]->lock.unlock();
  }
};

}  // namespace

struct SelectHook {
  SelectWait* sel = nullptr;
  Waker waker;
  std::int32_t index = -1;
  bool armed = false;             // the commit armed its source (read after commit_state == 2)
  std::atomic<bool> done{false};  // select_hook_fire has returned
};

void select_hook_fire(SelectHook* hook) noexcept {
  std::int32_t expected = -1;
  if (hook->sel->fired.compare_exchange_strong(expected, hook->index, std::memory_order_acq_rel)) {
    hook->waker.wake();
  }
  hook->done.store(true, std::memory_order_release);  // the last touch of the hook
}

void select_hook_wait(const SelectHook* hook) noexcept {
  // Long only if the firing thread was preempted between taking the hook and firing it.
  spin_wait_while([&] { return !hook->done.load(std::memory_order_acquire); });
}

namespace {

struct SelectCommit {
  Locks locks;
  TimerEntry* timer;  // null: no timeout, or a plain thread (it times out by itself)
  bool committed = false;
  // Source cases (null/0 without): armed here, after the timer, before the unlocks.
  SelectCase* cases = nullptr;
  SelectHook* hooks = nullptr;
  std::size_t n = 0;
  std::atomic<int>* state = nullptr;  // 1 while this runs, 2 once done (with sources only)
  static bool run(void* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto* c = static_cast<SelectCommit*>(a);
    // Copied first: with no channel to hold (every case nil, or only a timeout) nothing keeps
    // the selector parked once the timer is armed; it may fire, and the select return and its
    // frame be reused, before timer_add() returns. With channels, `locks.chans` (in that frame)
    // stays valid until the last unlock, which the woken selector's re-lock waits for. With
    // sources the selector waits for `state` instead, so the frame stays valid to the end.
    const Locks locks = c->locks;
    std::atomic<int>* const state = c->state;
    if (state) state->store(1, std::memory_order_relaxed);
    c->committed = true;
    if (c->timer) timer_add(c->timer);  // before the unlocks: see step 4 above
    if (state) {
      for (std::size_t i = 0; i < c->n; ++i) {
        SelectCase& sc = c->cases[i];
        if (sc.kind != SelectCase::kSource) continue;
        SelectHook* h = &c->hooks[i];
        h->armed = sc.source->arm(sc.source_obj, h);
        if (!h->armed) select_hook_fire(h);  // ready (or failed) already
      }
    }
    for (std::size_t i = 0; i < locks.n; ++i) locks.chans[i]->lock.unlock();
    if (state) state->store(2, std::memory_order_release);  // the last touch of the frame
    return true;
  }
};

struct SelectTimeout {
  TimerEntry timer;  // first member
  SelectWait* sel;
  Waker waker;
  std::int32_t index;
  static void fire(TimerEntry* t) {
    auto* self = reinterpret_cast<SelectTimeout*>(t);
    std::int32_t expected = -1;
    if (self->sel->fired.compare_exchange_strong(expected, self->index,
                                                 std::memory_order_acq_rel)) {
      self->waker.wake();
    }
  }
};

struct ThreadTimeout {
  SelectWait* sel;
  std::int32_t index;
  static bool run(void* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto* self = static_cast<ThreadTimeout*>(a);
    std::int32_t expected = -1;
    return self->sel->fired.compare_exchange_strong(expected, self->index,
                                                    std::memory_order_acq_rel);
  }
};

constexpr std::size_t kInlineCases = 8;  // selects up to this size keep `poll` on the stack

// A case that completed (kDone or kClosed), its locks released, in either pass: wakes the peer
// it was matched with, throws for a send on a closed channel, records whether a receive got a
// value. Returns the case's index.
inline std::size_t finish_case(SelectCase& sc, std::uint32_t index, TryResult r,
                               const Waker& wake) {
  if (!wake.empty()) wake.wake();
  if (sc.kind == SelectCase::kSend) {
    if (r == TryResult::kClosed) throw ChannelClosed("weft::select: send on a closed channel");
  } else {
    sc.received = r == TryResult::kDone;
  }
  return index;
}

// What select_with learned about the cases.
struct CaseSummary {
  std::size_t nactive;  // channel cases, indices in `poll`, in poll order
  std::size_t nsources;
  std::size_t default_index;  // n: none
  std::size_t timeout_index;  // n: none
  std::int64_t deadline;      // the earliest timeout's
};

// No channel case was ready in the fast pass, which left `poll` a random permutation: the
// sources, then steps 2-4. Out of line, so that the fast pass saves few registers.
[[gnu::noinline]] std::size_t select_locked_or_park(SelectCase* cases, std::size_t n,
                                                    std::uint32_t* poll, const CaseSummary& summary)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const std::size_t nactive = summary.nactive;
  const std::size_t nsources = summary.nsources;
  const std::size_t default_index = summary.default_index;
  const std::size_t timeout_index = summary.timeout_index;
  const std::int64_t deadline = summary.deadline;
  // Sources, from a random start (a socket readiness check is a syscall: only when no channel
  // case is ready).
  if (nsources > 0) {
    const std::size_t start = fast_rand(static_cast<std::uint32_t>(n));
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (start + k) % n;
      if (cases[i].kind == SelectCase::kSource && cases[i].source->ready_now(cases[i].source_obj)) {
        return i;
      }
    }
  }

  // 2: the lock order, the distinct channels by address.
  Scratch<ChanCore*> lockv(nactive);
  for (std::size_t p = 0; p < nactive; ++p) lockv[p] = cases[poll[p]].chan;
  if (nactive <= 8) {
    // Insertion sort: selects are small, and std::sort's set-up costs more than the sorting.
    for (std::size_t i = 1; i < nactive; ++i) {
      ChanCore* c = lockv[i];
      std::size_t j = i;
      for (; j > 0 && std::less<>{}(c, lockv[j - 1]); --j) lockv[j] = lockv[j - 1];
      lockv[j] = c;
    }
  } else {
    std::sort(lockv.data(), lockv.data() + nactive);
  }
  const Locks locks{
      lockv.data(),
      static_cast<std::size_t>(std::unique(lockv.data(), lockv.data() + nactive) - lockv.data())};

  // 3: poll.
  locks.lock();
  for (std::size_t p = 0; p < nactive; ++p) {
    SelectCase& sc = cases[poll[p]];
    Waker wake;
    TryResult r = sc.kind == SelectCase::kRecv ? recv_locked(sc.chan, sc.slot, &wake)
                                               : send_locked(sc.chan, sc.slot, &wake);
    if (r == TryResult::kNotReady) continue;
    locks.unlock();
    return finish_case(sc, poll[p], r, wake);
  }
  if (default_index != n) {
    locks.unlock();
    return default_index;
  }
  if (timeout_index != n && deadline <= now_ns()) {
    locks.unlock();
    return timeout_index;
  }

  // Queue one waiter per case, in poll order (random), and park. The order matters when one
  // channel appears in several cases: a peer takes the first waiter of a queue, so queuing in
  // case order would always hand it the lowest-numbered case (Go gets the same randomness from
  // its lock order, a heap sort of the random poll order).
  SelectWait sel;
  const Waker me = Waker::current();
  Scratch<ChanWaiter> waiters(n);
  for (std::size_t p = 0; p < nactive; ++p) {
    const std::size_t i = poll[p];
    SelectCase& sc = cases[i];
    ChanWaiter& w = waiters[i];
    w.waker = me;
    w.slot = sc.slot;
    w.sel = &sel;
    w.case_index = static_cast<std::uint32_t>(i);
    (sc.kind == SelectCase::kRecv ? sc.chan->recvq : sc.chan->sendq).push_back(&w);
  }
  const bool fiber = me.fiber() != nullptr;
  SelectTimeout timeout{{}, &sel, me, static_cast<std::int32_t>(timeout_index)};
  timeout.timer.when_ns = deadline;
  timeout.timer.fire = &SelectTimeout::fire;
  const bool has_timeout = timeout_index != n;
  SelectCommit commit{locks, fiber && has_timeout ? &timeout.timer : nullptr};
  Scratch<SelectHook> hooks(nsources > 0 ? n : 0);
  std::atomic<int> commit_state{0};
  if (nsources > 0) {
    for (std::size_t i = 0; i < n; ++i) {
      hooks[i].sel = &sel;
      hooks[i].waker = me;
      hooks[i].index = static_cast<std::int32_t>(i);
    }
    commit.cases = cases;
    commit.hooks = hooks.data();
    commit.n = n;
    commit.state = &commit_state;
  }
  // With sources: wait until the commit is done with this frame, then take every armed source's
  // hook back (waiting for a fire in progress).
  auto disarm_sources = [&] {
    if (nsources == 0) return;
    while (commit_state.load(std::memory_order_acquire) == 1) __builtin_ia32_pause();
    for (std::size_t i = 0; i < n; ++i) {
      if (cases[i].kind == SelectCase::kSource && hooks[i].armed) {
        cases[i].source->disarm(cases[i].source_obj, &hooks[i]);
      }
    }
  };

  auto unlink_losers = [&] {
    locks.lock();
    for (std::size_t i = 0; i < n; ++i) {
      ChanWaiter& w = waiters[i];
      if (w.linked) {
        (cases[i].kind == SelectCase::kRecv ? cases[i].chan->recvq : cases[i].chan->sendq)
            .remove(&w);
      }
    }
    locks.unlock();
  };

  try {
    if (!fiber && has_timeout) {
      ThreadTimeout tt{&sel, static_cast<std::int32_t>(timeout_index)};
      thread_park_until(&SelectCommit::run, &commit, deadline, &ThreadTimeout::run, &tt);
    } else {
      park(&SelectCommit::run, &commit, WaitReason::kSelect);
    }
  } catch (const FiberUnwind&) {
    if (!commit.committed) {
      // Thrown at park() entry: we still hold the locks and nothing can have fired.
      for (std::size_t i = 0; i < n; ++i) {
        ChanWaiter& w = waiters[i];
        if (w.linked) {
          (cases[i].kind == SelectCase::kRecv ? cases[i].chan->recvq : cases[i].chan->sendq)
              .remove(&w);
        }
      }
      locks.unlock();
      throw;
    }
    std::int32_t expected = -1;
    const bool abandoned = sel.fired.compare_exchange_strong(expected, SelectWait::kAbandoned,
                                                             std::memory_order_acq_rel);
    if (commit.timer) timer_cancel(commit.timer);
    disarm_sources();
    unlink_losers();
    if (!abandoned && expected >= 0) {
      SelectCase& sc = cases[expected];
      if (sc.kind == SelectCase::kRecv && waiters[expected].success) sc.chan->destroy_elem(sc.slot);
    }
    throw;
  }

  const std::int32_t fired = sel.fired.load(std::memory_order_acquire);
  WEFT_ASSERT(fired >= 0 && static_cast<std::size_t>(fired) < n, "select woke without a winner");
  if (commit.timer) timer_cancel(commit.timer);
  disarm_sources();
  unlink_losers();
  if (static_cast<std::size_t>(fired) == timeout_index) return timeout_index;
  SelectCase& sc = cases[fired];
  if (sc.kind == SelectCase::kSource) return static_cast<std::size_t>(fired);
  if (sc.kind == SelectCase::kSend) {
    if (!waiters[fired].success) throw ChannelClosed("weft::select: send on a closed channel");
  } else {
    sc.received = waiters[fired].success;
  }
  return static_cast<std::size_t>(fired);
}

// The fast pass and its set-up; `poll` has room for n entries.
[[gnu::always_inline]] inline std::size_t select_with(SelectCase* cases, std::size_t n,
                                                      std::uint32_t* poll) {
  // One pass over the cases: the channel cases (nil ones never fire) go to `poll` in case order,
  // to be shuffled as the fast pass below reaches them.
  std::size_t nactive = 0;
  std::size_t nsources = 0;
  std::size_t default_index = n;
  std::size_t timeout_index = n;
  std::int64_t deadline = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < n; ++i) {
    const SelectCase& sc = cases[i];
    switch (sc.kind) {
      case SelectCase::kRecv:
      case SelectCase::kSend:
        if (sc.chan) poll[nactive++] = static_cast<std::uint32_t>(i);
        break;
      case SelectCase::kSource:
        ++nsources;
        break;
      case SelectCase::kTimeout:
        if (timeout_index == n || sc.deadline_ns < deadline) {
          timeout_index = i;
          deadline = sc.deadline_ns;
        }
        break;
      case SelectCase::kDefault:
        if (default_index != n) {
          throw std::logic_error("weft::select: more than one case_default");
        }
        default_index = i;
        break;
    }
  }
  if (nsources > 0 && !in_fiber()) [[unlikely]] {
    throw std::logic_error(
        "weft::select: socket cases (case_readable / case_writable) need a fiber, but select was "
        "called from a plain thread");
  }
  if (nactive == 0 && nsources == 0) {
    if (default_index != n) return default_index;
    if (timeout_index == n) park_forever(n == 0 ? WaitReason::kForever : WaitReason::kSelect);
  }

  // 1: the poll order, drawn lazily (Fisher-Yates: step p swaps a uniform pick of the cases not
  // yet polled into place p). A select whose first pick is ready draws one number; one that
  // polls every case leaves `poll` a uniformly random permutation for the locked pass.
  //
  // Fast pass, one channel at a time in poll order: a case that is ready is taken under its own
  // lock alone. Choosing the first ready case in a random order is what the locked pass below
  // does too, so the choice stays uniform; buffered channels that look empty (recv) or full
  // (send) are skipped without locking. Only when nothing is ready do we pay for locking every
  // channel, which is what makes the poll-then-enqueue step atomic.
  for (std::size_t p = 0; p < nactive; ++p) {
    if (nactive - p > 1) {
      const std::size_t j = p + fast_rand(static_cast<std::uint32_t>(nactive - p));
      std::swap(poll[p], poll[j]);
    }
    SelectCase& sc = cases[poll[p]];
    ChanCore* c = sc.chan;
    if (c->cap > 0 && !c->closed.load(std::memory_order_acquire)) {
      const std::size_t count = c->count.load(std::memory_order_relaxed);
      if (sc.kind == SelectCase::kRecv ? count == 0 : count == c->cap) continue;
    }
    Waker wake;
    c->lock.lock();
    TryResult r = sc.kind == SelectCase::kRecv ? recv_locked(c, sc.slot, &wake)
                                               : send_locked(c, sc.slot, &wake);
    c->lock.unlock();
    if (r == TryResult::kNotReady) continue;
    return finish_case(sc, poll[p], r, wake);
  }
  return select_locked_or_park(
      cases, n, poll, CaseSummary{nactive, nsources, default_index, timeout_index, deadline});
}

}  // namespace

// select_with is inlined into both branches: the fast pass is compiled twice, so that a select
// of up to kInlineCases cases pays for no owner of a heap array (5 instructions of its ~300).
std::size_t select_run(SelectCase* cases, std::size_t n) {
  if (n > kInlineCases) [[unlikely]] {
    const std::unique_ptr<std::uint32_t[]> poll(new std::uint32_t[n]);
    return select_with(cases, n, poll.get());
  }
  std::uint32_t poll[kInlineCases];
  return select_with(cases, n, poll);
}

}  // namespace weft::detail
