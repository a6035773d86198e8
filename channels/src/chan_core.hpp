// ChanCore: Go's hchan, type-erased. One SpinLock per channel guards every field below it, the
// ring buffer and both wait queues, and every ChanWaiter while it is linked.
//
// Invariants:
//  - never a plain sender and a plain receiver both waiting: a waiter is only queued when the op
//    could not complete, i.e. there was nobody on the other side and no buffer room/value (both
//    queues may hold select waiters: a select with a send and a receive case on this channel, or
//    one that fired elsewhere and has not dequeued its stale waiter yet) -- WEFT_ASSERT-checked;
//  - count <= cap (WEFT_ASSERT-checked); a plain sender waits only while count == cap, a plain
//    receiver only while count == 0;
//  - once closed, both queues are empty and stay empty.
//
// Hand-off: an op that finds a waiter on the other side moves the value directly between the two
// slots (skipping the buffer for unbuffered channels; through it for a full buffered one, to keep
// FIFO), records the outcome in the waiter, unlocks, and only then wakes it. A waiter's frame may
// vanish right after wake(), so nothing touches it after the unlock.
//
// select: a waiter of a select carries `sel`, shared by all the waiters of that select. Whoever
// takes such a waiter off a queue first wins `sel->fired` by CAS (-1 -> case index); losers skip
// it. The selecting fiber removes its remaining waiters itself after it wakes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "weft/detail/assert.hpp"
#include "weft/detail/chan_core.hpp"
#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/park.hpp"
#include "weft/detail/spin_lock.hpp"

namespace weft::detail {

struct SelectWait {
  std::atomic<std::int32_t> fired{-1};  // -1 pending, >= 0 winning case, kAbandoned at unwind
  static constexpr std::int32_t kAbandoned = -2;
};

struct ChanWaiter {
  Waker waker;
  ChanWaiter* prev = nullptr;
  ChanWaiter* next = nullptr;
  void* slot = nullptr;       // send: value to move from; recv: storage to construct into
  SelectWait* sel = nullptr;  // null for a plain send/recv
  std::uint32_t case_index = 0;
  bool linked = false;
  bool success = false;  // set by the waker: value moved (true) or channel closed (false)
};

// A channel's send or receive queue, FIFO.
using WaiterQueue = IntrusiveList<ChanWaiter>;

// Go's dequeue(): takes the first waiter of `q` that can still be claimed. A select waiter is
// claimed by winning its select's CAS; one whose select already fired elsewhere is dropped.
inline ChanWaiter* claim_waiter(WaiterQueue& q) noexcept {
  while (ChanWaiter* w = q.front()) {
    q.remove(w);
    if (!w->sel) return w;
    std::int32_t expected = -1;
    if (w->sel->fired.compare_exchange_strong(expected, static_cast<std::int32_t>(w->case_index),
                                              std::memory_order_acq_rel)) {
      return w;
    }
  }
  return nullptr;
}

// Debug checks: whether a plain (non-select) waiter is among the first `limit` entries of `q`.
inline bool has_plain_waiter(const WaiterQueue& q, int limit) noexcept {
  for (const ChanWaiter* w = q.front(); w && limit-- > 0; w = w->next) {
    if (!w->sel) return true;
  }
  return false;
}

struct TimerChannel;
class ChanCore;

// A channel's link in the list of grown rings (grown_rings.hpp), guarded by that list's mutex.
struct GrownRingNode {
  GrownRingNode* prev = nullptr;
  GrownRingNode* next = nullptr;
  bool linked = false;
  ChanCore* chan = nullptr;
};

// The ring is lazy (Go preallocates it): a channel whose whole ring fits kInlineRingBytes gets
// it inline, right after the core, as before; a larger one starts with none and grows it on
// demand (grow_ring_locked, doubling, up to cap), so a Chan<std::string>(1024) that never holds
// more than a few values costs a few hundred bytes, not 32 KiB. The ring never shrinks on the
// data path (a channel that filled once is likely to fill again, and shrinking would put
// allocation on the hot path); the heap return frees large rings it finds empty once a burst is
// over (grown_rings.hpp).
class ChanCore {
 public:
  static constexpr std::size_t kInlineRingBytes = 512;
  static constexpr std::size_t kFirstRingBytes = 256;  // the first heap ring, at least 4 slots

  ChanCore(std::size_t capacity, const ElemOps* elem_ops, char* inline_ring,
           std::size_t inline_slots)
      : ops(elem_ops),
        cap(capacity),
        inline_buf(inline_ring),
        buf(inline_ring),
        ring_cap(inline_slots) {}

  SpinLock lock;
  const ElemOps* const ops;
  const std::size_t cap;
  char* const inline_buf;                      // right after the core (null: no inline ring)
  char* buf ABSL_GUARDED_BY(lock);             // ring_cap slots of ops->size bytes
  std::size_t ring_cap ABSL_GUARDED_BY(lock);  // slots in buf, <= cap
  std::atomic<std::size_t> count{0};           // buffered values; written under lock, read anywhere
  std::size_t recvx ABSL_GUARDED_BY(lock) = 0;  // next slot to receive from
  std::size_t sendx ABSL_GUARDED_BY(lock) = 0;  // next slot to send into
  std::atomic<bool> closed{false};              // written under lock
  WaiterQueue recvq ABSL_GUARDED_BY(lock);
  WaiterQueue sendq ABSL_GUARDED_BY(lock);
  std::atomic<std::uint32_t> refs{1};  // Chan<T> handles sharing this channel
  TimerChannel* timer = nullptr;       // set once at creation for after()/Ticker channels
  // On the list of grown rings (grown_rings.hpp; both guarded by that list's mutex, and the flag
  // read without it by the last release).
  std::atomic<bool> ring_listed{false};
  GrownRingNode ring_node;

  void* slot_at(std::size_t i) const noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
    return buf + i * ops->size;
  }
  // Index of the slot after i, around the ring.
  std::size_t next_slot(std::size_t i) const noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
    return i + 1 == ring_cap ? 0 : i + 1;
  }

  void move_elem(void* dst, void* src) const noexcept {
    if (ops->move_construct) {
      ops->move_construct(dst, src);
      return;
    }
    // Trivially copyable: word-sized values (the common case) without a call into libc.
    switch (ops->size) {
      case 8:
        std::memcpy(dst, src, 8);
        break;
      case 4:
        std::memcpy(dst, src, 4);
        break;
      case 16:
        std::memcpy(dst, src, 16);
        break;
      default:
        std::memcpy(dst, src, ops->size);
    }
  }
  void destroy_elem(void* p) const noexcept {
    if (ops->destroy) ops->destroy(p);
  }
  void check_invariants() const noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
    // Both queues may hold waiters: a select parked with a send and a receive case on this
    // channel (Go's select3.go "sees itself"), or a select that already fired elsewhere and has
    // not yet dequeued its stale waiter. What never happens is a plain sender and a plain
    // receiver both waiting (the later one would have taken the earlier). Bounded scan.
    WEFT_ASSERT(recvq.empty() || sendq.empty() || !has_plain_waiter(recvq, 16) ||
                    !has_plain_waiter(sendq, 16),
                "channel has a plain sender and a plain receiver both waiting");
    WEFT_ASSERT(count.load(std::memory_order_relaxed) <= ring_cap && ring_cap <= cap,
                "channel buffer over capacity");
  }
};

// The alignment of a channel's heap ring.
inline std::size_t ring_align(const ElemOps* ops) noexcept {
  return ops->align > alignof(std::max_align_t) ? ops->align : alignof(std::max_align_t);
}

// The building blocks shared by plain ops and select; all run with c->lock held. A waiter to
// wake after unlocking is returned through *wake. Defined here, always inlined: a call with its
// saved registers was about 30 instructions of a ping-pong round trip's 920, and a sixth of a
// select's.
enum class TryResult : std::uint8_t { kDone, kClosed, kNotReady };

// The ring is full (count == ring_cap) and the channel is not (ring_cap < cap): grows it
// (chan_core.cpp).
void grow_ring_locked(ChanCore* c) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->lock);

[[gnu::always_inline]] inline TryResult send_locked(ChanCore* c, void* src, Waker* wake) noexcept
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->lock) {
  c->check_invariants();
  if (c->closed.load(std::memory_order_relaxed)) return TryResult::kClosed;
  if (ChanWaiter* r = claim_waiter(c->recvq)) {
    // A parked receiver: the buffer is empty, so hand the value straight to it.
    c->move_elem(r->slot, src);
    r->success = true;
    *wake = r->waker;
    return TryResult::kDone;
  }
  const std::size_t n = c->count.load(std::memory_order_relaxed);
  if (n < c->cap) {
    if (n == c->ring_cap) grow_ring_locked(c);
    c->move_elem(c->slot_at(c->sendx), src);
    c->sendx = c->next_slot(c->sendx);
    c->count.store(n + 1, std::memory_order_relaxed);
    return TryResult::kDone;
  }
  return TryResult::kNotReady;
}

// kDone: a value was constructed at dst; kClosed: closed and drained (dst untouched).
[[gnu::always_inline]] inline TryResult recv_locked(ChanCore* c, void* dst, Waker* wake) noexcept
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->lock) {
  c->check_invariants();
  const std::size_t n = c->count.load(std::memory_order_relaxed);
  if (ChanWaiter* s = claim_waiter(c->sendq)) {
    if (c->cap == 0) {
      c->move_elem(dst, s->slot);
    } else {
      // Full buffer with a parked sender: take the head, and the sender's value becomes the
      // tail (same slot, as the ring is full), so FIFO order holds.
      WEFT_ASSERT(n == c->cap, "sender parked on a buffered channel that has room");
      void* head = c->slot_at(c->recvx);
      c->move_elem(dst, head);
      c->destroy_elem(head);
      c->move_elem(head, s->slot);
      c->recvx = c->next_slot(c->recvx);
      c->sendx = c->recvx;
    }
    s->success = true;
    *wake = s->waker;
    return TryResult::kDone;
  }
  if (n > 0) {
    void* head = c->slot_at(c->recvx);
    c->move_elem(dst, head);
    c->destroy_elem(head);
    c->recvx = c->next_slot(c->recvx);
    c->count.store(n - 1, std::memory_order_relaxed);
    return TryResult::kDone;
  }
  if (c->closed.load(std::memory_order_relaxed)) return TryResult::kClosed;
  return TryResult::kNotReady;
}

// Parks the caller for good (nil channel, empty select). Returns only by FiberUnwind.
void park_forever(WaitReason reason);

}  // namespace weft::detail
