// RWMutex (weft/sync.hpp): one state word for the fast paths, two WaitLists for the slow ones,
// and, once readers on several workers overlap, one reader counter per worker.
//
// state_: the number of readers counted in the word (high 32 bits, in units of kReader) and four
// flags (low bits). kWriter: a writer holds it. kWriterWaiting: writers_ is non-empty, or a writer
// holding guard_ has announced itself and is counting the spread readers. kReadersWaiting: readers_
// is non-empty. kSpread: readers count in spread_ (set once). The count sits above the flags so
// that one fetch_sub can never borrow from them, even when unlock_shared is misused. Invariants:
// the flags change only under guard_, except kWriter: the writer's fast-path lock sets it without
// guard_ (its CAS needs a word of exactly 0, so never once spread) and the fast-path unlocks clear
// it. So once spread, kWriter is set only under guard_, which the proofs below rely on. kWriter and
// readers inside hold at once only transiently (below). Every change to the word is a CAS or an
// add, never a store, so no count is ever overwritten.
//
// Central fast paths: lock_shared is one fetch_add (Go's RLock: an add never fails under
// contention, a CAS loop does), which counts the reader whatever the flags say; if a writer held
// or waited, the reader takes its count back through unlock_shared -- which hands the lock to a
// waiting writer if that count was the last -- and queues. So a reader count may briefly include
// readers that do not hold the lock; every decision that needs "no readers" (a writer taking the
// lock, a hand-off) re-checks under guard_, and the reader that takes its count back makes the
// hand-off a real last reader could not. lock takes a word that is exactly 0; unlock_shared is
// a load and a CAS (not Go's add: it must not subtract from a word spread meanwhile; contention
// on the word, where a CAS loop would retry, is what spreads it) and goes slow only when it was
// the last reader and a writer waits; unlocking what is not held is seen from the old count (0),
// and the count is put back before the throw, so the word ends as it was; unlock clears a word
// that is exactly kWriter (once spread: kWriter, kSpread and whatever count the word keeps).
//
// Spread readers. With the count in one word, two cores reading at once hand its cache line to
// each other twice per read section: on a 2-vCPU host a read section cost 53 ns against 15 ns
// on one worker. A reader that finds another inside (on a runtime with more than one worker)
// counts an overlap; after kSpreadAfterOverlaps, note_overlap allocates one counter per worker
// (RWReaderSlots, each on its own cache line) and, under guard_, sets spread_ and then kSpread.
// From then on a reader adds 1 to its worker's counter and loads the word (lock_shared_spread);
// unlocking subtracts 1 from the counter of the worker it is on then, which may be another one
// (fibers migrate): only the sum over the counters and the word's count means anything -- the
// readers inside, readers_inside(). A writer announces itself first (kWriterWaiting, under
// guard_) and sums after; a reader adds first and loads the word after. All four are seq_cst,
// so (Dekker) either the reader sees the announcement and backs out, or the writer's sum sees the
// reader. Every reader inside added before the announcement, so the sum sees each one's add and
// never counts a subtraction without its add: it is never below the readers inside, and it is 0
// only when nobody is. A reader leaving while a writer is announced hands over if it was the last
// (hand_off_if_last_reader, under guard_); a reader backing out re-loads the word after its
// subtraction, so a writer whose sum still counted it gets the hand-off from it. Readers granted
// by a writer's unlock are added to counter 0. Readers that counted in the word before the
// spread (or that read spread_ a moment late) stay counted there; they unlock through a counter
// (release_word_count diverts once it sees kSpread), which leaves the word's count high and the
// counters' sum low by the same amount.
// So once spread, kWriter is never set while a reader is inside. A reader that sees kWriter
// after its subtraction either just left (its subtraction let another reader hand over) or held
// nothing: under guard_, with kWriter still set, the sum tells them apart (0, or negative for a
// surplus unlock, which throws as in the central mode). A surplus unlock with no writer around
// makes the sum negative, which the next writer's sum finds: it aborts with a message (the
// alternative, waiting for a negative count to reach 0, hangs).
//
// Lifetime: as with any mutex, a writer that got in may destroy the RWMutex (POSIX asks this of
// its locks), while an unlock_shared whose subtraction let it in is still running. In the word
// only the last reader's own hand-off lets a queued writer in (any other reader would be in a
// lock_shared, on a mutex its owner may not destroy), and it touches the mutex for the last time
// before the wake -- except at shutdown, where the queued writer's unwinding may reopen the word
// to a fast-path writer while that reader heads for the guard. Spread, any leaving reader may be
// the one, and it reads the word after its subtraction: before subtracting it marks itself in its
// counter's slot -- a worker whose index is the slot's sets the slot's `owner_leaving` (a plain
// release store: that worker is its only writer); a plain thread, or a worker that shares the
// slot with others, counts itself in the slot's `leaving` instead -- and clears the mark as its
// last access; the destructor waits while any slot holds a mark. A writer that saw the subtraction
// synchronised with it, so it sees the mark. release_word_count never subtracts from a spread word
// (a CAS that fails on kSpread), so no reader leaves unmarked.
//
// Shutdown: a waiter unwound (FiberUnwind) before its grant leaves its list; a writer that does
// so also clears kWriterWaiting when it was the last one queued, and lets in the readers that
// queued only because of it.
//
// Hand-off: a slow unlock grants the lock to the woken waiters before it wakes them (their
// WaitNode's grant; the count already includes them), so a woken waiter owns what it waited for
// and never races a newcomer. A writer's unlock releases every queued reader first (they all
// came while it held the lock), then the next writer; the last reader's unlock hands over to the
// first queued writer.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>

#include "sched/sync_services.hpp"
#include "sync/wait_list_park.hpp"
#include "weft/detail/assert.hpp"
#include "weft/detail/spin_wait.hpp"
#include "weft/sync.hpp"

namespace weft {
namespace detail {

// One reader counter per worker of the runtime that spread the mutex, each on its own cache line.
// A mutex used later by a runtime with more workers shares counters (index modulo count): any
// counter will do, only the sum matters.
struct RWReaderSlots {
  // n: the readers counted here, negative when readers locked elsewhere and unlocked here (a
  // single counter drifts without bound -- grants go to counter 0, fibers migrate -- so it gets a
  // full 64 bits). owner_leaving: the worker of this slot's index is in an unlock_shared that left
  // through this counter and may still read the mutex (header comment, "Lifetime"); written by
  // that worker only, so a plain store. leaving: the same for everyone else who uses the slot
  // (plain threads, and workers past `count` when a larger runtime uses the mutex), counted.
  struct alignas(64) Slot {
    std::atomic<std::int64_t> n{0};
    std::atomic<bool> owner_leaving{false};
    std::atomic<std::uint32_t> leaving{0};
  };
  explicit RWReaderSlots(unsigned workers, Slot* slots) : count(workers), slot(slots) {}
  // worker: current_worker_index(), kNotAWorker on a plain thread (try_lock_shared, unlocks).
  bool owns(unsigned worker) const noexcept { return worker < count; }
  Slot& of(unsigned worker) noexcept {
    if (owns(worker)) [[likely]]
      return slot[worker];
    return slot[worker == kNotAWorker ? 0 : worker % count];
  }
  Slot& current() noexcept { return of(current_worker_index()); }
  const unsigned count;
  const std::unique_ptr<Slot[]> slot;
};

bool rw_mutex_readers_spread(const RWMutex& mu) noexcept {
  return mu.spread_.load(std::memory_order_acquire) != nullptr;
}

}  // namespace detail

namespace {

using detail::RWReaderSlots;
using detail::WaitNode;
using detail::WaitReason;

constexpr std::uint32_t kGranted = 1;

[[noreturn]] void surplus_unlock_shared(std::int64_t inside) {
  std::fprintf(stderr,
               "weft: RWMutex: the readers inside add up to %lld: unlock_shared() was called more "
               "often than lock_shared() (a read lock released twice, or one never taken); "
               "aborting rather than letting writers wait for a count that cannot reach 0\n",
               static_cast<long long>(inside));
  std::abort();
}

}  // namespace

RWMutex::~RWMutex() {
  RWReaderSlots* sp = spread_.load(std::memory_order_acquire);
  if (!sp) return;
  // An unlock_shared whose subtraction let a writer in may still be reading the mutex (the word,
  // guard_) while that writer destroys it: wait until every one has finished. They never park,
  // so this is a short wait unless the kernel preempted one. Each is marked in its counter's slot.
  for (unsigned i = 0; i < sp->count; ++i) {
    const RWReaderSlots::Slot& slot = sp->slot[i];
    detail::spin_wait_while([&] {
      return slot.owner_leaving.load(std::memory_order_acquire) ||
             slot.leaving.load(std::memory_order_acquire) != 0;
    });
  }
  delete sp;
}

std::int64_t RWMutex::readers_sum(std::uint64_t s) const {
  std::int64_t n = static_cast<std::int64_t>(s >> kReaderShift);
  if (RWReaderSlots* sp = spread_.load(std::memory_order_seq_cst)) {
    for (unsigned i = 0; i < sp->count; ++i) {
      n += sp->slot[i].n.load(std::memory_order_seq_cst);
    }
  }
  return n;
}

std::int64_t RWMutex::readers_inside(std::uint64_t s) const {
  const std::int64_t n = readers_sum(s);
  if (n < 0) [[unlikely]]
    surplus_unlock_shared(n);
  return n;
}

std::uint64_t RWMutex::grant_readers(std::uint64_t s, std::uint64_t n) {
  if (!(s & kSpread)) return n * kReader;
  // Counted in a counter, where their unlocks will take them off; guard_'s release publishes it
  // to the next writer that sums, the wake to the readers.
  spread_.load(std::memory_order_relaxed)
      ->slot[0]
      .n.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
  return 0;
}

bool RWMutex::try_lock() noexcept {
  std::uint64_t expected = 0;
  if (state_.compare_exchange_strong(expected, kWriter, std::memory_order_acquire)) return true;
  return (expected & kSpread) && try_lock_spread();
}

bool RWMutex::try_lock_spread() noexcept {
  // Summing the counters needs lock_slow's announce-then-sum, which needs guard_.
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  bool owned = false;
  // Held, or writers queued (no barging past them): fail.
  while (!(s & (kWriter | kWriterWaiting)) && writers_.empty()) {
    if (!state_.compare_exchange_weak(s, s | kWriterWaiting, std::memory_order_seq_cst)) continue;
    s |= kWriterWaiting;
    if (readers_inside(s) == 0) {
      while (!state_.compare_exchange_weak(s, (s | kWriter) & ~kWriterWaiting,
                                           std::memory_order_acquire)) {
      }
      owned = true;
    } else {
      // Readers inside: withdraw the announcement. Readers that saw it and backed out re-check
      // under guard_ and get in.
      while (!state_.compare_exchange_weak(s, s & ~kWriterWaiting, std::memory_order_relaxed)) {
      }
    }
    break;
  }
  guard_.unlock();
  return owned;
}

void RWMutex::lock() {
  detail::require_fiber("weft::RWMutex::lock()");
  std::uint64_t expected = 0;
  if (state_.compare_exchange_strong(expected, kWriter, std::memory_order_acquire)) return;
  lock_slow();
}

void RWMutex::lock_slow() {
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    // Free, and no writer queued ahead of us: take it once no reader is inside.
    if (!(s & kWriter) && writers_.empty()) {
      if ((s & kSpread) && !(s & kWriterWaiting)) {
        // Announce before summing the counters (see the header comment).
        if (!state_.compare_exchange_weak(s, s | kWriterWaiting, std::memory_order_seq_cst)) {
          continue;
        }
        s |= kWriterWaiting;
      }
      if (readers_inside(s) == 0) {
        // writers_ is empty: an announcement is ours to clear.
        if (state_.compare_exchange_weak(s, (s | kWriter) & ~kWriterWaiting,
                                         std::memory_order_acquire)) {
          guard_.unlock();
          return;
        }
        continue;
      }
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
    const std::uint64_t add = grant_readers(s, n);
    std::uint64_t next;
    do {
      next = (s & ~kWriterWaiting) + add;
      if (readers_.empty()) next &= ~kReadersWaiting;
    } while (!state_.compare_exchange_weak(s, next, std::memory_order_release));
  }
  guard_.unlock();
  detail::wake_chain(chain);
}

void RWMutex::unlock() {
  std::uint64_t expected = kWriter;
  if (state_.compare_exchange_strong(expected, 0, std::memory_order_release)) return;
  // Once spread the word keeps the count of readers that locked in it and unlocked in a counter
  // (the one that spread it, at least), which means nothing on its own: ignore it here.
  if ((expected & ~kReaderMask) == (kWriter | kSpread) &&
      state_.compare_exchange_strong(expected, expected & ~kWriter, std::memory_order_release)) {
    return;
  }
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
    const std::uint64_t add = grant_readers(s, n);
    do {
      next = (s & ~(kWriter | kReadersWaiting)) + add;
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
  if (RWReaderSlots* sp = spread_.load(std::memory_order_acquire))
    return try_lock_shared_spread(sp);
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  while (!(s & (kWriter | kWriterWaiting))) {
    WEFT_ASSERT((s & kReaderMask) != kReaderMask, "too many RWMutex readers");
    if (state_.compare_exchange_weak(s, s + kReader, std::memory_order_acquire)) return true;
  }
  return false;
}

void RWMutex::lock_shared_contended(std::uint64_t seen) {
  WEFT_ASSERT((seen & kReaderMask) != kReaderMask, "too many RWMutex readers");
  if (!(seen & (kWriter | kWriterWaiting))) {
    // We hold it. Another reader was inside (count it), or the count was spread after we read
    // spread_ (ours stays valid in the word).
    if (!(seen & kSpread)) note_overlap();
    return;
  }
  // A writer holds or waits: take the count back from the word, where it went, handing over if
  // it was the last, and queue.
  release_word_count();
  lock_shared_slow();
}

void RWMutex::note_overlap() {
  if (overlaps_.fetch_add(1, std::memory_order_relaxed) + 1 != kSpreadAfterOverlaps) return;
  const unsigned n = detail::current_worker_count();
  if (n < 2) return;  // no runtime, or one worker: the line never leaves its core
  // No exception here: the caller holds the read lock and lock_shared would leak it.
  std::unique_ptr<RWReaderSlots::Slot[]> slots(new (std::nothrow) RWReaderSlots::Slot[n]);
  if (!slots) return;
  RWReaderSlots* fresh = new (std::nothrow) RWReaderSlots(n, slots.get());
  if (!fresh) return;
  slots.release();
  guard_.lock();
  if (!spread_.load(std::memory_order_relaxed)) {
    // spread_ first, then kSpread: release_word_count, seeing kSpread, goes to the counters and
    // must find them. No writer's fast path (a word of exactly 0) can open meanwhile or later:
    // the caller is counted in the word and leaves through a counter, so the word keeps a count.
    spread_.store(fresh, std::memory_order_seq_cst);
    state_.fetch_or(kSpread, std::memory_order_seq_cst);
    fresh = nullptr;
  }
  guard_.unlock();
  delete fresh;
}

void RWMutex::lock_shared_slow() {  // lock_shared checked that we run on a fiber
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (!(s & (kWriter | kWriterWaiting))) {
      if (RWReaderSlots* sp = spread_.load(std::memory_order_relaxed)) {
        // kWriterWaiting cannot appear while we hold guard_; kWriter only through a writer's
        // unlock clearing it.
        std::atomic<std::int64_t>& mine = sp->current().n;
        mine.fetch_add(1, std::memory_order_seq_cst);
        s = state_.load(std::memory_order_seq_cst);
        if (!(s & (kWriter | kWriterWaiting))) {
          guard_.unlock();
          return;
        }
        mine.fetch_sub(1, std::memory_order_seq_cst);
        continue;
      }
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

bool RWMutex::try_lock_shared_spread(RWReaderSlots* sp) noexcept {
  std::atomic<std::int64_t>& mine = sp->current().n;
  mine.fetch_add(1, std::memory_order_seq_cst);
  if (!(state_.load(std::memory_order_seq_cst) & (kWriter | kWriterWaiting))) [[likely]]
    return true;
  // A writer holds or is announced: back out, and hand over if a writer's sum counted us last.
  mine.fetch_sub(1, std::memory_order_seq_cst);
  if (state_.load(std::memory_order_seq_cst) & kWriterWaiting) hand_off_if_last_reader();
  return false;
}

void RWMutex::lock_shared_spread(RWReaderSlots* sp) {
  if (!try_lock_shared_spread(sp)) lock_shared_slow();
}

void RWMutex::unlock_shared_spread(RWReaderSlots* sp) {
  // Say that we still read the mutex, then leave: from our subtraction on a writer may get in and
  // destroy it (a writer that saw the subtraction synchronised with it, so it sees the mark), and
  // the destructor waits for the mark to go, the last thing we do. On the worker that owns the
  // slot the mark is a plain store (nothing parks in here, so the worker stays ours, and no one
  // else writes it); a locked add per mark cost 5-7 ns per read section.
  const unsigned worker = detail::current_worker_index();
  RWReaderSlots::Slot& slot = sp->of(worker);
  std::atomic<std::int64_t>& mine = slot.n;
  struct LeftMark {
    RWReaderSlots::Slot& slot;
    const bool owner;
    LeftMark(RWReaderSlots::Slot& s, bool owns) : slot(s), owner(owns) {
      if (owner) {
        slot.owner_leaving.store(true, std::memory_order_release);
      } else {
        slot.leaving.fetch_add(1, std::memory_order_relaxed);
      }
    }
    ~LeftMark() {
      if (owner) {
        slot.owner_leaving.store(false, std::memory_order_release);
      } else {
        slot.leaving.fetch_sub(1, std::memory_order_release);
      }
    }
  } left{slot, sp->owns(worker)};
  mine.fetch_sub(1, std::memory_order_seq_cst);
  const std::uint64_t s = state_.load(std::memory_order_seq_cst);
  if (!(s & (kWriter | kWriterWaiting))) [[likely]]
    return;
  if (s & kWriter) {
    // A writer holds it: our subtraction may have been the one that let it in (another reader
    // handed over before we loaded the word), or we held nothing.
    if (surplus_while_writer_holds()) {
      mine.fetch_add(1, std::memory_order_seq_cst);
      throw std::logic_error(
          "weft::RWMutex::unlock_shared: no reader holds the mutex, a writer does (unlock() "
          "releases a write lock)");
    }
    return;
  }
  hand_off_if_last_reader();
}

void RWMutex::unlock_shared_after_spread() {
  // kSpread is set after spread_ (note_overlap): the acquire load that sees it sees spread_.
  (void)state_.load(std::memory_order_acquire);
  unlock_shared_spread(spread_.load(std::memory_order_acquire));
}

bool RWMutex::surplus_while_writer_holds() {
  // Under guard_ nothing sets kWriter (once spread only guard_ holders do); while it stays set,
  // readers only back out, each on one counter, so the sum is the readers inside -- 0 -- minus
  // any surplus unlocks. A sum taken while the writer let go may be anything: not trusted.
  guard_.lock();
  bool surplus = false;
  const std::uint64_t s = state_.load(std::memory_order_seq_cst);
  if (s & kWriter) {
    const std::int64_t sum = readers_sum(s);
    surplus = sum < 0 && (state_.load(std::memory_order_seq_cst) & kWriter);
  }
  guard_.unlock();
  return surplus;
}

void RWMutex::unlock_shared_slow(std::uint64_t seen) {
  if ((seen >> kReaderShift) == 0) {
    // Nothing to release: the count wrapped (the flags below it did not). Put it back.
    state_.fetch_add(kReader, std::memory_order_relaxed);
    throw std::logic_error(
        "weft::RWMutex::unlock_shared: no reader holds the mutex (unlock() "
        "releases a write lock)");
  }
  hand_off_if_last_reader();
}

void RWMutex::hand_off_if_last_reader() {
  guard_.lock();
  std::uint64_t s = state_.load(std::memory_order_seq_cst);
  WaitNode* w = nullptr;
  // Re-check under the guard: the hand-off happens once, by whoever sees no reader and no writer.
  if (!(s & kWriter) && !writers_.empty() && readers_inside(s) == 0) {
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
