// Mutex, CondVar, WaitGroup, Semaphore, Barrier on the WaitList + SpinLock pair (weft/sync.hpp).
//
// Common pattern: take guard_, decide, enqueue a WaitNode from our own frame, park_unlocking()
// (weft/detail/park.hpp), whose commit releases guard_ once we are parked. Wakers pop the node
// under guard_, record the outcome in node.grant, release guard_, then wake. If the park throws
// FiberUnwind (shutdown), the withdraw step retakes guard_ and either unlinks the node or gives
// back what a racing waker granted. A bounded wait (CancelToken, timeout) is the same with
// queue_and_park_bounded: a bound that fires first unlinks the node under guard_ and wakes it, so
// the waiter got nothing and nothing was lost; a waker that got there first wins and the wait
// completes (sync/wait_list_park.hpp).
//
// Mutex follows Go's sync.Mutex. state_: kLocked; kWaiters (waiters_ is non-empty; changed under
// guard_ only); kWoken (an unlock woke a waiter that has not come back yet: no other unlock wakes
// anyone meanwhile; the woken waiter clears it in the CAS that takes the lock or requeues it);
// kStarving (unlocks hand the lock to the first waiter, which never sees it free; set by a woken
// waiter that waited over 1 ms and lost again, ended by a hand-off that leaves nobody waiting or
// a next waiter that has not waited long). Invariant: kStarving implies kLocked. kWaiters may
// outlast the queue (a bounded waiter whose bound had fired leaves without queueing): the next
// slow unlock finds nobody and clears it.
// Every change is a CAS or an atomic and/or, never a store over bits another thread may set.
#include "weft/sync.hpp"

#include <stdexcept>

#include "sched/sync_services.hpp"
#include "sync/wait_list_park.hpp"
#include "weft/detail/assert.hpp"
#include "weft/detail/park.hpp"

namespace weft {
namespace {

using detail::queue_and_park;
using detail::SpinLock;
using detail::WaitList;
using detail::WaitNode;
using detail::WaitReason;
using detail::wake_chain;

// Mutex::state_ (design in the Mutex section below).
constexpr std::uint32_t kLocked = 1;
constexpr std::uint32_t kWaiters = 2;
constexpr std::uint32_t kWoken = 4;
constexpr std::uint32_t kStarving = 8;
// Mutex WaitNode grants.
constexpr std::uint32_t kHandoff = 1;            // the lock itself: it never became free in between
constexpr std::uint32_t kWokenTurn = 2;          // a turn to compete, with kWoken held for it
constexpr std::int64_t kStarvationNs = 1000000;  // 1 ms, as in Go
constexpr int kSpinRounds = 4;                   // Go's active_spin
constexpr int kPausesPerRound = 30;              // Go's active_spin_cnt

}  // namespace

// ---- Mutex
// ----------------------------------------------------------------------------------------

void Mutex::lock() {
  // Checked even when uncontended, so that misuse from a plain thread fails the same way every
  // time instead of only under contention (a kernel thread must never park here).
  detail::require_fiber("weft::Mutex::lock()");
  std::uint32_t expected = 0;
  if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire)) return;
  (void)lock_slow(nullptr);  // unbounded: always OK
}

absl::Status Mutex::lock(const CancelToken& bound) {
  detail::require_fiber("weft::Mutex::lock(bound)");
  std::uint32_t expected = 0;
  if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  return lock_slow(&bound);
}

bool Mutex::try_lock() noexcept {
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  while (!(s & kLocked)) {
    if (state_.compare_exchange_weak(s, s | kLocked, std::memory_order_acquire)) return true;
  }
  return false;
}

absl::Status Mutex::lock_slow(const CancelToken* bound) {
  // Spin a little first while the holder may be running on another worker (Go's rule: four
  // rounds of 30 pauses). Re-trying after every single pause pulled the lock word away from the
  // holder and bounced it between cores: mutex bench (4 fibers per worker, 2 workers) 30 ns per
  // section with 32 one-pause retries, 7-10 ns with these rounds (Go 22 ns).
  for (int round = 0; round < kSpinRounds; ++round) {
    if (try_lock()) return absl::OkStatus();
    if (!detail::lock_spin_may_help()) break;
    for (int i = 0; i < kPausesPerRound; ++i) __builtin_ia32_pause();
  }
  if (try_lock()) return absl::OkStatus();
  WaitNode node;
  node.since_ns = detail::now_ns();
  bool woken = false;  // an unlock woke us and we hold kWoken for this turn
  for (;;) {
    guard_.lock();
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    // Waited over 1 ms and lost again: switch the mutex to hand-offs (Go's starvation mode).
    const bool starving = woken && detail::now_ns() - node.since_ns > kStarvationNs;
    for (;;) {
      if (!(s & kLocked)) {
        // Free (never in starvation mode, which keeps it locked from hand-off to hand-off).
        const std::uint32_t next = (s | kLocked) & ~(woken ? kWoken : 0u);
        if (state_.compare_exchange_weak(s, next, std::memory_order_acquire)) {
          guard_.unlock();
          return absl::OkStatus();
        }
        continue;
      }
      // Held: queue. Our turn's kWoken goes, so the next unlock wakes someone again.
      std::uint32_t next = (s | kWaiters) & ~(woken ? kWoken : 0u);
      if (starving) next |= kStarving;
      if (next == s || state_.compare_exchange_weak(s, next, std::memory_order_relaxed)) break;
    }
    // A waiter that was woken and lost the race goes back to the front (Go's LIFO requeue).
    const bool front = woken;
    woken = false;
    // Given back on unwind: a hand-off is unlocked, a woken turn passed on.
    const auto give_back = [this](std::uint32_t grant) {
      if (grant == kHandoff) {
        unlock();
      } else {
        pass_woken_turn();
      }
    };
    if (bound) {
      absl::Status st = detail::queue_and_park_bounded(
          guard_, waiters_, node, WaitReason::kMutex, give_back, *bound, "weft::Mutex::lock",
          // Called with guard_ held (queue_and_park_bounded's contract), which the analysis
          // cannot see through the reference it holds it by.
          [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { after_waiter_withdrew(); }, front);
      if (!st.ok()) return st;
    } else {
      queue_and_park(guard_, waiters_, node, WaitReason::kMutex, give_back, front);
    }
    if (node.grant == kHandoff) return absl::OkStatus();  // unlock() handed the lock to us
    WEFT_ASSERT(node.grant == kWokenTurn, "a Mutex waiter woke without a grant");
    woken = true;
  }
}

void Mutex::after_waiter_withdrew() {
  // A bound took its waiter off the queue: an empty queue has nobody to wake or starve for.
  if (!waiters_.empty()) return;
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  while (!state_.compare_exchange_weak(s, s & ~(kWaiters | kStarving), std::memory_order_relaxed)) {
  }
}

void Mutex::unlock() {
  std::uint32_t expected = kLocked;
  if (state_.compare_exchange_strong(expected, 0, std::memory_order_release)) return;
  if (!(expected & kLocked)) {
    throw std::logic_error("weft::Mutex::unlock: the mutex is not locked");
  }
  unlock_slow();
}

void Mutex::unlock_slow() {
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  while (!(s & kStarving)) {
    // Normal mode: release, then let one waiter compete for it.
    if (state_.compare_exchange_weak(s, s & ~kLocked, std::memory_order_release)) {
      wake_waiter(s & ~kLocked);
      return;
    }
  }
  // Starvation mode: hand the lock to the first waiter; it stays locked throughout.
  guard_.lock();
  WaitNode* n = waiters_.pop_front();
  s = state_.load(std::memory_order_relaxed);
  std::uint32_t next;
  if (!n) {
    // Every waiter withdrew (bounded waits): nobody to hand it to.
    do {
      next = s & ~(kLocked | kWaiters | kStarving);
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
    guard_.unlock();
    return;
  }
  // Starvation mode ends when nobody else waits, or the next in line has not waited long (Go).
  const bool stay =
      !waiters_.empty() && detail::now_ns() - waiters_.front()->since_ns > kStarvationNs;
  do {
    next = s;
    if (waiters_.empty()) next &= ~kWaiters;
    if (!stay) next &= ~kStarving;
  } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
  n->grant = kHandoff;
  const detail::Waker waker = n->waker;
  guard_.unlock();
  waker.wake();
}

void Mutex::wake_waiter(std::uint32_t s) {
  // Nobody to wake, a woken waiter is still on its way (kWoken: it will take the lock or queue
  // again, and a later unlock wakes the next), or a newcomer took the lock (its unlock will do
  // this): Go's mutexWoken rule. Waking on every contended unlock woke waiters that only found
  // the lock taken again and parked again: on 16 cores, 32 fibers on one mutex paid ~1.4 us an
  // increment, against Go's 0.16 us.
  for (;;) {
    if (!(s & kWaiters) || (s & (kLocked | kWoken | kStarving))) return;
    if (state_.compare_exchange_weak(s, s | kWoken, std::memory_order_relaxed)) break;
  }
  guard_.lock();
  WaitNode* n = waiters_.pop_front();
  s = state_.load(std::memory_order_relaxed);
  std::uint32_t next;
  do {
    next = s;
    if (!n) next &= ~kWoken;  // every waiter withdrew: nobody takes the turn
    if (waiters_.empty()) next &= ~kWaiters;
  } while (!state_.compare_exchange_weak(s, next, std::memory_order_relaxed));
  if (!n) {
    guard_.unlock();
    return;
  }
  n->grant = kWokenTurn;
  const detail::Waker waker = n->waker;
  guard_.unlock();
  waker.wake();
}

void Mutex::pass_woken_turn() {
  // A woken waiter that leaves without competing (unwound) gives its turn to the next one.
  const std::uint32_t s = state_.fetch_and(~kWoken, std::memory_order_relaxed) & ~kWoken;
  wake_waiter(s);
}

// ---- CondVar
// --------------------------------------------------------------------------------------

namespace {
constexpr std::uint32_t kNotified = 1;
}  // namespace

void CondVar::wait(std::unique_lock<Mutex>& lock) {
  detail::require_fiber("weft::CondVar::wait()");
  if (!lock.owns_lock()) throw std::logic_error("weft::CondVar::wait: the lock is not held");
  WaitNode node;
  guard_.lock();
  node.waker = detail::Waker::current();
  waiters_.push_back(&node);
  // The user's mutex is released only once we are parked (in the commit, after the guard): a
  // notify after it must find us on the list (no lost wake-up). The commit may touch the mutex
  // after a notify woke us because we cannot return before re-acquiring it.
  Mutex* const mutex = lock.mutex();
  detail::park_unlocking(
      guard_, WaitReason::kCondVar,
      [&](bool parked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_) {
        if (node.linked) waiters_.remove(&node);
        if (parked) lock.release();  // the commit unlocked it; the unique_lock must not again
      },
      [mutex] { mutex->unlock(); });
  mutex->lock();
}

std::cv_status CondVar::wait_until(std::unique_lock<Mutex>& lock,
                                   std::chrono::steady_clock::time_point deadline) {
  detail::require_fiber("weft::CondVar::wait_until()");
  // The deadline, or the fiber's stop request, ends the wait as a timeout.
  return wait(lock, CancelToken::until(deadline)).ok() ? std::cv_status::no_timeout
                                                       : std::cv_status::timeout;
}

absl::Status CondVar::wait(std::unique_lock<Mutex>& lock, const CancelToken& bound) {
  detail::require_fiber("weft::CondVar::wait(bound)");
  if (!lock.owns_lock()) throw std::logic_error("weft::CondVar::wait: the lock is not held");
  // As in wait(), plus the bounds: a bound that fires before a notify unlinks the node under
  // guard_ and wakes us. The user's mutex is re-taken before returning either way.
  struct Record {
    CondVar* cv;
    WaitNode node;
    bool withdrawn = false;  // guard_
  } rec;
  rec.cv = this;
  detail::WaitBounds bounds(
      bound,
      [](void* a) {
        auto* r = static_cast<Record*>(a);
        r->cv->guard_.lock();
        if (!r->node.linked) {  // notified first
          r->cv->guard_.unlock();
          return;
        }
        r->cv->waiters_.remove(&r->node);
        r->withdrawn = true;
        const detail::Waker waker = r->node.waker;
        r->cv->guard_.unlock();
        waker.wake();
      },
      &rec);
  struct Disarm {  // on every way out, after guard_ was released
    detail::WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  guard_.lock();
  if (!bounds.arm(/*defer_timer=*/true)) {
    guard_.unlock();
    return bounds.status("weft::CondVar::wait");
  }
  rec.node.waker = detail::Waker::current();
  waiters_.push_back(&rec.node);
  Mutex* const mutex = lock.mutex();
  detail::park_unlocking(
      guard_, WaitReason::kCondVar,
      [&](bool parked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_) {
        if (rec.node.linked) waiters_.remove(&rec.node);
        if (parked) lock.release();
      },
      [mutex] { mutex->unlock(); }, bounds.timer());
  bounds.disarm();
  mutex->lock();
  return rec.withdrawn ? bounds.status("weft::CondVar::wait") : absl::OkStatus();
}

void CondVar::notify_one() {
  guard_.lock();
  WaitNode* n = waiters_.pop_front();
  if (!n) {
    guard_.unlock();
    return;
  }
  n->grant = kNotified;
  const detail::Waker waker = n->waker;
  guard_.unlock();
  waker.wake();
}

void CondVar::notify_all() {
  guard_.lock();
  WaitNode* chain = nullptr;
  while (WaitNode* n = waiters_.pop_front()) {
    n->grant = kNotified;
    n->next = chain;
    chain = n;
  }
  guard_.unlock();
  wake_chain(chain);
}

// ---- WaitGroup
// ------------------------------------------------------------------------------------

void WaitGroup::add(std::int64_t n) {
  const std::uint64_t delta = static_cast<std::uint64_t>(n) << 32;
  const std::uint64_t s = state_.fetch_add(delta, std::memory_order_acq_rel) + delta;
  const auto count = static_cast<std::int32_t>(s >> 32);
  const auto waiters = static_cast<std::uint32_t>(s);
  if (count < 0)
    throw std::logic_error("weft::WaitGroup: negative counter (more done() than add())");
  if (count > 0 || waiters == 0) return;
  // The counter reached zero with waiters parked: they hold the WaitGroup alive until woken.
  guard_.lock();
  state_.store(0, std::memory_order_release);
  WaitNode* chain = nullptr;
  while (WaitNode* node = waiters_.pop_front()) {
    node->next = chain;
    chain = node;
  }
  guard_.unlock();
  wake_chain(chain);
}

void WaitGroup::wait() {
  if ((state_.load(std::memory_order_acquire) >> 32) == 0) return;
  WaitNode node;
  guard_.lock();
  if (!count_waiter_locked()) {
    guard_.unlock();
    return;
  }
  queue_and_park(guard_, waiters_, node, WaitReason::kWaitGroup, [](std::uint32_t) {});
}

bool WaitGroup::count_waiter_locked() {
  std::uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 32) == 0) return false;
    if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) return true;
  }
}

absl::Status WaitGroup::wait(const CancelToken& bound) {
  detail::require_fiber("weft::WaitGroup::wait(bound)");
  if ((state_.load(std::memory_order_acquire) >> 32) == 0) return absl::OkStatus();
  WaitNode node;
  guard_.lock();
  if (!count_waiter_locked()) {
    guard_.unlock();
    return absl::OkStatus();
  }
  // A withdrawn waiter uncounts itself (under guard_, which add() takes before it wakes anyone).
  return detail::queue_and_park_bounded(
      guard_, waiters_, node, WaitReason::kWaitGroup, [](std::uint32_t) {}, bound,
      "weft::WaitGroup::wait", [this] { state_.fetch_sub(1, std::memory_order_acq_rel); });
}

// ---- Semaphore
// ------------------------------------------------------------------------------------

Semaphore::Semaphore(std::int64_t initial) : count_(initial) {
  if (initial < 0) throw std::invalid_argument("weft::Semaphore: negative initial count");
}

bool Semaphore::try_acquire() noexcept {
  std::int64_t c = count_.load(std::memory_order_relaxed);
  while (c > 0) {
    if (count_.compare_exchange_weak(c, c - 1, std::memory_order_acquire)) return true;
  }
  return false;
}

void Semaphore::acquire() {
  if (try_acquire()) return;
  WaitNode node;
  guard_.lock();
  if (try_acquire()) {
    guard_.unlock();
    return;
  }
  queue_and_park(guard_, waiters_, node, WaitReason::kSemaphore,
                 [this](std::uint32_t) { release(1); });
}

absl::Status Semaphore::acquire(const CancelToken& bound) {
  detail::require_fiber("weft::Semaphore::acquire(bound)");
  if (try_acquire()) return absl::OkStatus();
  WaitNode node;
  guard_.lock();
  if (try_acquire()) {
    guard_.unlock();
    return absl::OkStatus();
  }
  return detail::queue_and_park_bounded(
      guard_, waiters_, node, WaitReason::kSemaphore, [this](std::uint32_t) { release(1); }, bound,
      "weft::Semaphore::acquire");
}

void Semaphore::release(std::int64_t n) {
  if (n < 0) throw std::invalid_argument("weft::Semaphore::release: negative count");
  WaitNode* chain = nullptr;
  guard_.lock();
  while (n > 0) {
    WaitNode* node = waiters_.pop_front();
    if (!node) break;
    node->grant = 1;
    node->next = chain;
    chain = node;
    --n;
  }
  if (n > 0) count_.fetch_add(n, std::memory_order_release);
  guard_.unlock();
  wake_chain(chain);
}

// ---- Barrier
// --------------------------------------------------------------------------------------

Barrier::Barrier(std::size_t count) : expected_(count) {
  if (count == 0) throw std::invalid_argument("weft::Barrier: the party must have at least one");
}

WaitNode* Barrier::complete_phase_locked() {
  arrived_ = 0;
  WaitNode* chain = nullptr;
  while (WaitNode* n = waiters_.pop_front()) {
    n->grant = 1;
    n->next = chain;
    chain = n;
  }
  return chain;
}

void Barrier::arrive_and_wait() {
  WaitNode node;
  guard_.lock();
  if (++arrived_ >= expected_) {
    WaitNode* chain = complete_phase_locked();
    guard_.unlock();
    wake_chain(chain);
    return;
  }
  // At shutdown an unwound waiter's arrival stays counted: the party is being torn down.
  queue_and_park(guard_, waiters_, node, WaitReason::kBarrier, [](std::uint32_t) {});
}

absl::Status Barrier::arrive_and_wait(const CancelToken& bound) {
  detail::require_fiber("weft::Barrier::arrive_and_wait(bound)");
  WaitNode node;
  guard_.lock();
  if (++arrived_ >= expected_) {
    WaitNode* chain = complete_phase_locked();
    guard_.unlock();
    wake_chain(chain);
    return absl::OkStatus();
  }
  return detail::queue_and_park_bounded(
      guard_, waiters_, node, WaitReason::kBarrier, [](std::uint32_t) {}, bound,
      "weft::Barrier::arrive_and_wait", [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { --arrived_; });
}

void Barrier::arrive_and_drop() {
  guard_.lock();
  if (expected_ == 0) {
    guard_.unlock();
    throw std::logic_error("weft::Barrier::arrive_and_drop: the party is already empty");
  }
  --expected_;
  WaitNode* chain = nullptr;
  if (arrived_ > 0 && arrived_ >= expected_) chain = complete_phase_locked();
  guard_.unlock();
  wake_chain(chain);
}

}  // namespace weft
