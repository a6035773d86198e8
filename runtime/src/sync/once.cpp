// Once (weft/sync.hpp): a three-state word (idle, running, done) and a WaitList.
//
// enter() moves idle -> running for the one caller that runs f; callers that find it running
// queue and park; done returns at once. leave() publishes done (release: f's effects happen
// before every later acquire load of done) or, when f threw, goes back to idle, and wakes every
// waiter; after a throw each woken waiter calls enter() again, so exactly one of them runs f next.
// state_ changes only under guard_, except that the done check in call() reads it without.
// runner_ (the running caller's fiber id, 0 for a plain thread) turns recursion into an error.
#include <stdexcept>

#include "sync/wait_list_park.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace weft {

bool Once::enter() {
  for (;;) {
    guard_.lock();
    const std::uint32_t s = state_.load(std::memory_order_relaxed);
    if (s == kDone) {
      guard_.unlock();
      return false;
    }
    if (s == kIdle) {
      state_.store(kRunning, std::memory_order_relaxed);
      runner_ = this_fiber::id();
      guard_.unlock();
      return true;
    }
    if (runner_ != 0 && runner_ == this_fiber::id()) {
      guard_.unlock();
      throw std::logic_error(
          "weft::Once::call: the function called call() on the same Once; waiting for itself "
          "would deadlock");
    }
    if (!detail::in_fiber()) {
      guard_.unlock();
      throw std::logic_error(
          "weft::Once::call: another caller is running the function, and waiting for it needs "
          "a fiber (call from inside weft::run)");
    }
    detail::WaitNode node;
    detail::queue_and_park(guard_, waiters_, node, detail::WaitReason::kOnce, [](std::uint32_t) {});
  }
}

void Once::leave(bool ok) {
  detail::WaitNode* chain = nullptr;
  guard_.lock();
  state_.store(ok ? kDone : kIdle, std::memory_order_release);
  while (detail::WaitNode* n = waiters_.pop_front()) {
    n->grant = 1;
    n->next = chain;
    chain = n;
  }
  guard_.unlock();
  detail::wake_chain(chain);
}

}  // namespace weft
