// RWMutex (weft/sync.hpp): one state word for the fast paths, two WaitLists for the slow ones.
//
// state_: the number of readers holding the lock (high 32 bits, in units of kReader) and three
// flags (low bits). kWriter: a writer holds it. kWriterWaiting: writers_ is non-empty.
// kReadersWaiting: readers_ is non-empty. The count sits above the flags so that one fetch_sub
// can never borrow from them, even when unlock_shared is misused.
// Invariants: the flags change only under guard_ (so a waiter that queues and the flag that
// announces it appear together for every guard_ holder); kWriter and a reader count > 0 hold at
// once only transiently (below). Every change to the word is a CAS or an add, never a store, so
// no count is ever overwritten.
//
// Fast paths: lock_shared is one fetch_add (Go's RLock: an add never fails under contention, a
// CAS loop does), which counts the reader whatever the flags say; if a writer held or waited, the
// reader takes its count back through unlock_shared -- which hands the lock to a waiting writer
// if that count was the last -- and queues. So a reader count may briefly include readers that
// do not hold the lock; every decision that needs "no readers" (a writer taking the lock, a
// hand-off) re-checks the word under guard_, and the reader that takes its count back makes the
// hand-off a real last reader could not. lock takes a word that is exactly 0; unlock_shared is
// one fetch_sub (Go's RUnlock: under read-mostly contention a CAS loop fails and retries while
// the line bounces between cores) and goes slow only when it was the last reader and a writer
// waits; unlocking what is not held is seen from the old count (0), and the count is put back
// before the throw, so the word ends as it was; unlock clears a word that is exactly kWriter.
//
// Shutdown: a waiter unwound (FiberUnwind) before its grant leaves its list; a writer that does
// so also clears kWriterWaiting when it was the last one queued, and lets in the readers that
// queued only because of it.
//
// Hand-off: a slow unlock grants the lock to the woken waiters before it wakes them (their
// WaitNode's grant; the word already counts them), so a woken waiter owns what it waited for and
// never races a newcomer. A writer's unlock releases every queued reader first (they all came
// while it held the lock), then the next writer; the last reader's unlock hands over to the first
// queued writer.
#include <stdexcept>

#include "sync/wait_queue.hpp"
#include "weft/detail/assert.hpp"
#include "weft/sync.hpp"

namespace weft {
namespace {

using detail::WaitNode;
using detail::WaitReason;

constexpr std::uint32_t kGranted = 1;

}  // namespace

bool RWMutex::try_lock() noexcept {
  std::uint64_t expected = 0;
  return state_.compare_exchange_strong(expected, kWriter, std::memory_order_acquire);
}

void RWMutex::lock() {
  detail::require_fiber("weft::RWMutex::lock()");
  if (try_lock()) return;
  lock_slow();
}

void RWMutex::lock_slow() {
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    // Free, and no writer queued ahead of us: take it.
    if ((s & (kReaderMask | kWriter)) == 0 && writers_.empty()) {
      if (state_.compare_exchange_weak(s, s | kWriter, std::memory_order_acquire)) {
        guard_.unlock();
        return;
      }
      continue;
    }
    if (state_.compare_exchange_weak(s, s | kWriterWaiting, std::memory_order_relaxed)) break;
  }
  WaitNode node;
  // Granted: the unlocker set kWriter for us. On FiberUnwind with the grant already made, give
  // the lock back; without it, our node is gone and the flags may say "writer waiting" for
  // nobody, which would keep readers out for good.
  bool granted = false;
  try {
    detail::queue_and_park(guard_, writers_, node, WaitReason::kRWMutex,
                           [this, &granted](std::uint32_t) {
                             granted = true;
                             unlock();
                           });
  } catch (const detail::FiberUnwind&) {
    if (!granted) after_writer_withdrew();
    throw;
  }
  WEFT_ASSERT(node.grant == kGranted, "an RWMutex writer woke without the lock");
}

void RWMutex::after_writer_withdrew() {
  WaitNode* chain = nullptr;
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  if (writers_.empty()) {
    // No writer waits any more: readers may enter, and those that queued behind the one that
    // withdrew get in now unless a writer holds the lock (its unlock would release them).
    std::uint64_t n = 0;
    if (!(s & kWriter)) {
      while (WaitNode* r = readers_.pop_front()) {
        r->grant = kGranted;
        r->next = chain;
        chain = r;
        ++n;
      }
    }
    std::uint64_t next;
    do {
      next = (s & ~kWriterWaiting) + n * kReader;
      if (readers_.empty()) next &= ~kReadersWaiting;
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
  }
  guard_.unlock();
  detail::wake_chain(chain);
}

void RWMutex::unlock() {
  std::uint64_t expected = kWriter;
  if (state_.compare_exchange_strong(expected, 0, std::memory_order_release)) return;
  if (!(expected & kWriter)) {
    throw std::logic_error(
        "weft::RWMutex::unlock: no writer holds the mutex (unlock_shared() "
        "releases a read lock)");
  }
  unlock_slow();
}

void RWMutex::unlock_slow() {
  WaitNode* chain = nullptr;
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  std::uint64_t next;
  if (!readers_.empty()) {
    // The readers that queued while we held it all get in now.
    std::uint64_t n = 0;
    while (WaitNode* r = readers_.pop_front()) {
      r->grant = kGranted;
      r->next = chain;
      chain = r;
      ++n;
    }
    do {
      next = ((s & ~(kWriter | kReadersWaiting)) + n * kReader);
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
  } else if (WaitNode* w = writers_.pop_front()) {
    // Straight to the next writer: kWriter stays set.
    w->grant = kGranted;
    w->next = nullptr;
    chain = w;
    do {
      next = (writers_.empty() ? (s & ~kWriterWaiting) : s) & ~kReadersWaiting;
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
  } else {
    do {
      next = s & ~(kWriter | kReadersWaiting);
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
  }
  guard_.unlock();
  detail::wake_chain(chain);
}

bool RWMutex::try_lock_shared() noexcept {
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  while (!(s & (kWriter | kWriterWaiting))) {
    WEFT_ASSERT((s & kReaderMask) != kReaderMask, "too many RWMutex readers");
    if (state_.compare_exchange_weak(s, s + kReader, std::memory_order_acquire)) return true;
  }
  return false;
}

void RWMutex::lock_shared_contended([[maybe_unused]] std::uint64_t seen) {
  WEFT_ASSERT((seen & kReaderMask) != kReaderMask, "too many RWMutex readers");
  // A writer holds or waits: take the count back (handing over if it was the last) and queue.
  unlock_shared();
  lock_shared_slow();
}

void RWMutex::lock_shared_slow() {  // lock_shared checked that we run on a fiber
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (!(s & (kWriter | kWriterWaiting))) {
      if (state_.compare_exchange_weak(s, s + kReader, std::memory_order_acquire)) {
        guard_.unlock();
        return;
      }
      continue;
    }
    if (state_.compare_exchange_weak(s, s | kReadersWaiting, std::memory_order_relaxed)) break;
  }
  WaitNode node;
  // Granted: the writer's unlock counted us as a reader.
  detail::queue_and_park(guard_, readers_, node, WaitReason::kRWMutex,
                         [this](std::uint32_t) { unlock_shared(); });
  WEFT_ASSERT(node.grant == kGranted, "an RWMutex reader woke without the lock");
}

void RWMutex::unlock_shared_slow(std::uint64_t seen) {
  if ((seen >> kReaderShift) == 0) {
    // Nothing to release: the count wrapped (the flags below it did not). Put it back.
    state_.fetch_add(kReader, std::memory_order_relaxed);
    throw std::logic_error(
        "weft::RWMutex::unlock_shared: no reader holds the mutex (unlock() "
        "releases a write lock)");
  }
  // The last reader out, with a writer waiting: hand the lock over.
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_acquire);
  WaitNode* w = nullptr;
  // Re-check under the guard: the hand-off happens once, by whoever sees no reader and no writer.
  if ((s & (kReaderMask | kWriter)) == 0 && !writers_.empty()) {
    w = writers_.pop_front();
    w->grant = kGranted;
    std::uint64_t next;
    do {
      next = (s | kWriter) & (writers_.empty() ? ~kWriterWaiting : ~0ull);
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_acq_rel));
  }
  guard_.unlock();
  if (w) w->waker.wake();
}

}  // namespace weft
