// The parking steps every sync primitive shares (sync.cpp, rw_mutex.cpp, once.cpp): queue a
// WaitNode from the waiter's own frame under the primitive's SpinLock and park until a waker
// grants something; wake a chain of unlinked waiters. Design in sync.cpp's header comment.
#pragma once

#include <cstdint>

#include "weft/detail/park.hpp"
#include "weft/detail/spin_lock.hpp"
#include "weft/detail/wait_list.hpp"

namespace weft::detail {

// Queues `node` on `list` (guard held on entry) and parks until a waker grants it something
// (park_unlocking releases the guard). On FiberUnwind, unlinks the node or, if a waker already
// granted something, lets `give_back` return it once the guard is released. Guard not held on
// return.
template <class GiveBack>
inline void queue_and_park(SpinLock& guard, WaitList& list, WaitNode& node, WaitReason reason,
                           GiveBack give_back, bool front = false) ABSL_UNLOCK_FUNCTION(guard) {
  node.waker = Waker::current();
  node.grant = 0;
  if (front) {
    list.push_front(&node);
  } else {
    list.push_back(&node);
  }
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
