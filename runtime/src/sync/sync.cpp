// Mutex, CondVar, WaitGroup, Semaphore on the WaitList + SpinLock pair (weft/sync.hpp).
//
// Common pattern: take guard_, decide, enqueue a WaitNode from our own frame, park_unlocking()
// (weft/detail/park.hpp), whose commit releases guard_ once we are parked. Wakers pop the node
// under guard_, record the outcome in node.grant, release guard_, then wake. If the park throws
// FiberUnwind (shutdown), the withdraw step retakes guard_ and either unlinks the node or gives
// back what a racing waker granted.
#include "weft/sync.hpp"

#include <stdexcept>

#include "sync/wait_queue.hpp"
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

constexpr std::uint32_t kLocked = 1;
constexpr std::uint32_t kWaiters = 2;
constexpr std::uint32_t kHandoff = 1;
constexpr std::int64_t kStarvationNs = 1000000;  // 1 ms, as in Go

}  // namespace

// ---- Mutex
// ----------------------------------------------------------------------------------------

void Mutex::lock() {
  // Checked even when uncontended, so that misuse from a plain thread fails the same way every
  // time instead of only under contention (a kernel thread must never park here).
  detail::require_fiber("weft::Mutex::lock()");
  std::uint32_t expected = 0;
  if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire)) return;
  lock_slow();
}

bool Mutex::try_lock() noexcept {
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  while (!(s & kLocked)) {
    if (state_.compare_exchange_weak(s, s | kLocked, std::memory_order_acquire)) return true;
  }
  return false;
}

void Mutex::lock_slow() {
  for (int i = 0; i < 32; ++i) {
    if (try_lock()) return;
    __builtin_ia32_pause();
  }
  WaitNode node;
  node.since_ns = detail::now_ns();
  bool requeue = false;
  for (;;) {
    guard_.lock();
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    for (;;) {
      if (!(s & kLocked)) {
        if (state_.compare_exchange_weak(s, s | kLocked, std::memory_order_acquire)) {
          guard_.unlock();
          return;
        }
        continue;
      }
      if ((s & kWaiters) ||
          state_.compare_exchange_weak(s, s | kWaiters, std::memory_order_relaxed)) {
        break;
      }
    }
    // A waiter that was woken and lost the race goes back to the front (Go's LIFO requeue).
    queue_and_park(
        guard_, waiters_, node, WaitReason::kMutex, [this](std::uint32_t) { unlock(); }, requeue);
    if (node.grant == kHandoff) return;  // unlock() handed the lock to us: we own it
    requeue = true;
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
  guard_.lock();
  WaitNode* n = waiters_.pop_front();
  if (!n) {
    state_.store(0, std::memory_order_release);
    guard_.unlock();
    return;
  }
  const std::uint32_t waiters_bit = waiters_.empty() ? 0 : kWaiters;
  if (detail::now_ns() - n->since_ns > kStarvationNs) {
    // Starving waiter: hand the lock over directly; it never becomes free in between.
    n->grant = kHandoff;
    state_.store(kLocked | waiters_bit, std::memory_order_release);
  } else {
    n->grant = 0;
    state_.store(waiters_bit, std::memory_order_release);
  }
  const detail::Waker waker = n->waker;
  guard_.unlock();
  waker.wake();
}

// ---- CondVar
// --------------------------------------------------------------------------------------

namespace {
constexpr std::uint32_t kNotified = 1;
constexpr std::uint32_t kTimedOut = 2;
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
  if (!lock.owns_lock()) throw std::logic_error("weft::CondVar::wait_until: the lock is not held");
  const std::int64_t when =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  if (when <= detail::now_ns()) return std::cv_status::timeout;
  struct Wait {
    detail::TimerEntry timer;
    WaitNode node;
    CondVar* cv;
  } w;
  w.cv = this;
  w.timer.when_ns = when;
  w.timer.fire = [](detail::TimerEntry* t) {
    auto* self = reinterpret_cast<Wait*>(reinterpret_cast<char*>(t) - offsetof(Wait, timer));
    self->cv->guard_.lock();
    if (!self->node.linked) {  // notified first
      self->cv->guard_.unlock();
      return;
    }
    self->cv->waiters_.remove(&self->node);
    self->node.grant = kTimedOut;
    const detail::Waker waker = self->node.waker;
    self->cv->guard_.unlock();
    waker.wake();
  };
  guard_.lock();
  w.node.waker = detail::Waker::current();
  waiters_.push_back(&w.node);
  Mutex* const mutex = lock.mutex();
  // As in wait(); the timeout timer is armed by the commit and its callback takes guard_.
  detail::park_unlocking(
      guard_, WaitReason::kCondVar,
      [&](bool parked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_) {
        if (w.node.linked) waiters_.remove(&w.node);
        if (parked) lock.release();
      },
      [mutex] { mutex->unlock(); }, &w.timer);
  detail::timer_cancel(&w.timer);
  mutex->lock();
  return w.node.grant == kTimedOut ? std::cv_status::timeout : std::cv_status::no_timeout;
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
  std::uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 32) == 0) {
      guard_.unlock();
      return;
    }
    if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) break;
  }
  queue_and_park(guard_, waiters_, node, WaitReason::kWaitGroup, [](std::uint32_t) {});
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

}  // namespace weft
