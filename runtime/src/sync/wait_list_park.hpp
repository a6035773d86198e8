// The parking steps every sync primitive shares (sync.cpp, rw_mutex.cpp, once.cpp): queue a
// WaitNode from the waiter's own frame under the primitive's SpinLock and park until a waker
// grants something (or, bounded, until a CancelToken or the fiber's stop request withdraws it);
// wake a chain of unlinked waiters. Design in sync.cpp's header comment.
#pragma once

#include <absl/status/status.h>

#include <cstdint>

#include "weft/detail/park.hpp"
#include "weft/detail/spin_lock.hpp"
#include "weft/detail/wait_bounds.hpp"
#include "weft/detail/wait_list.hpp"

namespace weft::detail {

// Fills in the calling waiter and links `node` (the primitive's guard is held).
inline void enqueue_waiter(WaitList& list, WaitNode& node, bool front) {
  node.waker = Waker::current();
  node.grant = 0;
  if (front) {
    list.push_front(&node);
  } else {
    list.push_back(&node);
  }
}

// Queues `node` on `list` (guard held on entry) and parks until a waker grants it something
// (park_unlocking releases the guard). On FiberUnwind, unlinks the node or, if a waker already
// granted something, lets `give_back` return it once the guard is released. Guard not held on
// return.
template <class GiveBack>
inline void queue_and_park(SpinLock& guard, WaitList& list, WaitNode& node, WaitReason reason,
                           GiveBack give_back, bool front = false) ABSL_UNLOCK_FUNCTION(guard) {
  enqueue_waiter(list, node, front);
  std::uint32_t granted = 0;
  try {
    park_unlocking(guard, reason, [&](bool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard) {
      if (node.linked) {
        list.remove(&node);
      } else {
        granted = node.grant;
      }
    });
  } catch (const FiberUnwind&) {
    if (granted != 0) give_back(granted);  // guard released: give_back may take it
    throw;
  }
}

struct NoWithdrawHook {
  void operator()() const noexcept {}
};

// queue_and_park, bounded by `token` and by the calling fiber's stop request (see
// weft/detail/wait_bounds.hpp). Returns OK when a waker granted something (node.grant says what).
// Otherwise a bound withdrew the node before any waker reached it: nothing was granted,
// `on_withdraw()` ran with the guard held (a primitive that counts its waiters uncounts this one)
// and the status says why, prefixed with `what`. A bound that has already fired returns at once.
// Guard not held on return.
template <class GiveBack, class OnWithdraw = NoWithdrawHook>
inline absl::Status queue_and_park_bounded(SpinLock& guard, WaitList& list, WaitNode& node,
                                           WaitReason reason, GiveBack give_back,
                                           const CancelToken& token, const char* what,
                                           OnWithdraw on_withdraw = {}, bool front = false)
    ABSL_UNLOCK_FUNCTION(guard) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  struct Record {
    SpinLock* guard;
    WaitList* list;
    WaitNode* node;
    OnWithdraw* on_withdraw;
    bool withdrawn;  // guard; read by the waiter after its wake
  } rec{&guard, &list, &node, &on_withdraw, false};
  WaitBounds bounds(
      token,
      [](void* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        auto* r = static_cast<Record*>(a);
        r->guard->lock();
        if (!r->node->linked) {  // a waker granted it first: the wait completes
          r->guard->unlock();
          return;
        }
        r->list->remove(r->node);
        (*r->on_withdraw)();
        r->withdrawn = true;
        const Waker waker = r->node->waker;
        r->guard->unlock();
        waker.wake();
      },
      &rec);
  // Disarmed on every way out, always after the guard was released (a withdraw may be waiting
  // for it).
  struct Disarm {
    WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  // Armed with the guard held: a bound that fires now waits for the guard, i.e. for the commit.
  if (!bounds.arm(/*defer_timer=*/true)) {
    guard.unlock();
    return bounds.status(what);  // (the status reads why_, which a later firing cannot change)
  }
  enqueue_waiter(list, node, front);
  std::uint32_t granted = 0;
  try {
    park_unlocking(
        guard, reason,
        [&](bool) {
          if (node.linked) {
            list.remove(&node);
            on_withdraw();
          } else if (!rec.withdrawn) {
            granted = node.grant;
          }
        },
        NoParkHook{}, bounds.timer());
  } catch (const FiberUnwind&) {
    if (granted != 0) give_back(granted);
    throw;
  }
  bounds.disarm();
  return rec.withdrawn ? bounds.status(what) : absl::OkStatus();
}

// Wakes the waiters chained through `next` (unlinked under the guard, which is released now).
// Each node's frame may be gone once it is woken, so `next` is read first.
inline void wake_chain(WaitNode* chain) {
  while (chain) {
    WaitNode* next = chain->next;
    const Waker waker = chain->waker;
    waker.wake();
    chain = next;
  }
}

}  // namespace weft::detail
