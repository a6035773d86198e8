// Channel lifecycle and the plain send/recv/close paths; design and invariants in chan_core.hpp.
#include "chan_core.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "grown_rings.hpp"
#include "timer_chan.hpp"

namespace weft::detail {
namespace {

// Queues `w` on `q` (lock held) and parks until a peer or close() completes it (park_unlocking
// releases the lock once we are parked). On shutdown unwinding it withdraws the waiter, or
// destroys a value that a sender already delivered.
void wait_for_peer(ChanCore* c, WaiterQueue& q, ChanWaiter& w, bool is_recv)
    ABSL_UNLOCK_FUNCTION(c->lock) {
  w.waker = Waker::current();
  q.push_back(&w);
  park_unlocking(c->lock, is_recv ? WaitReason::kChanRecv : WaitReason::kChanSend,
                 [&](bool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->lock) {
                   if (w.linked) {
                     q.remove(&w);
                   } else if (is_recv && w.success) {
                     c->destroy_elem(w.slot);
                   }
                 });
}

}  // namespace

// The ring is full (count == ring_cap) and the channel is not (ring_cap < cap): a ring twice the
// size (the first one kFirstRingBytes worth), the values moved over in order. Under the lock,
// which is why it cannot throw: running out of memory here is fatal, as it is in Go.
void grow_ring_locked(ChanCore* c) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->lock) {
  const std::size_t size = c->ops->size;
  const std::size_t n = c->count.load(std::memory_order_relaxed);
  WEFT_ASSERT(n == c->ring_cap && c->ring_cap < c->cap, "channel ring grown while it has room");
  std::size_t want =
      c->ring_cap ? c->ring_cap * 2 : std::max<std::size_t>(4, ChanCore::kFirstRingBytes / size);
  want = std::min(want, c->cap);
  char* fresh = static_cast<char*>(
      ::operator new (want* size, std::align_val_t{ring_align(c->ops)}, std::nothrow));
  if (!fresh) {
    std::fprintf(stderr,
                 "weft: out of memory: cannot grow a channel's buffer to %zu values of %zu bytes "
                 "(capacity %zu)\n",
                 want, size, c->cap);
    std::abort();
  }
  for (std::size_t i = 0, from = c->recvx; i < n; ++i, from = c->next_slot(from)) {
    void* src = c->slot_at(from);
    c->move_elem(fresh + i * size, src);
    c->destroy_elem(src);
  }
  if (c->buf != c->inline_buf) {
    ::operator delete (static_cast<void*>(c->buf), std::align_val_t{ring_align(c->ops)});
  }
  c->buf = fresh;
  c->ring_cap = want;
  c->recvx = 0;
  c->sendx = n;
  list_grown_ring_locked(c);
}

void park_forever(WaitReason reason) {
  for (;;) park([](void*) { return true; }, nullptr, reason);
}

ChanCore* chan_make(std::size_t capacity, const ElemOps* ops) {
  // Header and (for a small ring) the ring in one allocation; the ring starts at an offset
  // aligned for T. A larger ring comes later, from grow_ring_locked.
  const std::size_t align = ops->align > alignof(ChanCore) ? ops->align : alignof(ChanCore);
  const std::size_t header = (sizeof(ChanCore) + ops->align - 1) / ops->align * ops->align;
  if (capacity > (SIZE_MAX - header) / (ops->size ? ops->size : 1)) throw std::bad_alloc();
  const bool inline_ring = capacity * ops->size <= ChanCore::kInlineRingBytes;
  void* mem =
      ::operator new (header + (inline_ring ? capacity * ops->size : 0), std::align_val_t{align});
  char* ring = inline_ring ? static_cast<char*>(mem) + header : nullptr;
  return ::new (mem) ChanCore(capacity, ops, ring, inline_ring ? capacity : 0);
}

void chan_retain(ChanCore* c) noexcept {
  if (c) c->refs.fetch_add(1, std::memory_order_relaxed);
}

// Not analysed for locks: the last handle is gone, so nothing else can reach the channel.
void chan_release(ChanCore* c) noexcept ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!c || c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  unlist_grown_ring(c);
  if (c->timer) destroy_timer(c);
  // Nobody else holds the channel, so no waiter can be queued (a waiter holds a handle).
  std::size_t n = c->count.load(std::memory_order_relaxed);
  for (std::size_t i = c->recvx; n > 0; --n) {
    c->destroy_elem(c->slot_at(i));
    i = c->next_slot(i);
  }
  if (c->buf != c->inline_buf) {
    ::operator delete (static_cast<void*>(c->buf), std::align_val_t{ring_align(c->ops)});
  }
  const std::size_t align = c->ops->align > alignof(ChanCore) ? c->ops->align : alignof(ChanCore);
  c->~ChanCore();
  ::operator delete (static_cast<void*>(c), std::align_val_t{align});
}

ChanResult chan_send(ChanCore* c, void* src, bool block) {
  if (!c) {
    if (!block) return ChanResult::kWouldBlock;
    park_forever(WaitReason::kChanSend);
  }
  Waker wake;
  c->lock.lock();
  switch (send_locked(c, src, &wake)) {
    case TryResult::kDone:
      c->lock.unlock();
      if (!wake.empty()) wake.wake();
      return ChanResult::kOk;
    case TryResult::kClosed:
      c->lock.unlock();
      return ChanResult::kClosed;
    case TryResult::kNotReady:
      break;
  }
  if (!block) {
    c->lock.unlock();
    return ChanResult::kWouldBlock;
  }
  ChanWaiter w;
  w.slot = src;
  wait_for_peer(c, c->sendq, w, /*is_recv=*/false);
  return w.success ? ChanResult::kOk : ChanResult::kClosed;
}

ChanResult chan_recv(ChanCore* c, void* dst, bool block) {
  if (!c) {
    if (!block) return ChanResult::kWouldBlock;
    park_forever(WaitReason::kChanRecv);
  }
  if (!block && c->count.load(std::memory_order_relaxed) == 0 && c->cap > 0 &&
      !c->closed.load(std::memory_order_acquire)) {
    // Go's lock-free "empty and open" check: a buffered channel with nothing in it. (Senders
    // cannot be parked on an empty buffered channel.)
    return ChanResult::kWouldBlock;
  }
  Waker wake;
  c->lock.lock();
  switch (recv_locked(c, dst, &wake)) {
    case TryResult::kDone:
      c->lock.unlock();
      if (!wake.empty()) wake.wake();
      return ChanResult::kOk;
    case TryResult::kClosed:
      c->lock.unlock();
      return ChanResult::kClosed;
    case TryResult::kNotReady:
      break;
  }
  if (!block) {
    c->lock.unlock();
    return ChanResult::kWouldBlock;
  }
  ChanWaiter w;
  w.slot = dst;
  wait_for_peer(c, c->recvq, w, /*is_recv=*/true);
  return w.success ? ChanResult::kOk : ChanResult::kClosed;
}

void chan_close(ChanCore* c) {
  if (!c) throw std::logic_error("weft::Chan::close: close of a nil channel");
  c->lock.lock();
  if (c->closed.load(std::memory_order_relaxed)) {
    c->lock.unlock();
    throw ChannelClosed("weft::Chan::close: close of a closed channel");
  }
  c->closed.store(true, std::memory_order_release);
  // Claim every waiter under the lock, chain them through `next`, wake them after unlocking.
  // Receivers get "closed" (nothing constructed); senders get "closed" and throw ChannelClosed.
  ChanWaiter* woken = nullptr;
  for (WaiterQueue* q : {&c->recvq, &c->sendq}) {
    while (ChanWaiter* w = claim_waiter(*q)) {
      w->success = false;
      w->next = woken;
      woken = w;
    }
  }
  c->lock.unlock();
  while (woken) {
    ChanWaiter* next = woken->next;  // read before wake(): the waiter's frame may then vanish
    const Waker waker = woken->waker;
    waker.wake();
    woken = next;
  }
}

std::size_t chan_size(const ChanCore* c) noexcept {
  return c ? c->count.load(std::memory_order_relaxed) : 0;
}

std::size_t chan_capacity(const ChanCore* c) noexcept { return c ? c->cap : 0; }

}  // namespace weft::detail
