// WaitList: the FIFO of parked waiters behind every weft sync primitive (Go's sema root). Nodes
// live in the waiters' own frames; the owning primitive's SpinLock guards the list and every
// node's fields while the node is linked. A waker unlinks a node, sets its outcome, releases the
// lock and only then wakes it: the node's frame may vanish right after wake().
#pragma once

#include <cstdint>

#include "weft/detail/park.hpp"

namespace weft::detail {

struct WaitNode {
  Waker waker;
  WaitNode* prev = nullptr;
  WaitNode* next = nullptr;
  std::int64_t since_ns = 0;  // when it started waiting (starvation checks, timeouts)
  std::uint32_t grant = 0;    // what the waker handed over (a permit, the lock); primitive-defined
  bool linked = false;
};

class WaitList {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  WaitNode* front() const noexcept { return head_; }
  void push_back(WaitNode* n) noexcept {
    n->prev = tail_;
    n->next = nullptr;
    (tail_ ? tail_->next : head_) = n;
    tail_ = n;
    n->linked = true;
  }
  void push_front(WaitNode* n) noexcept {
    n->prev = nullptr;
    n->next = head_;
    (head_ ? head_->prev : tail_) = n;
    head_ = n;
    n->linked = true;
  }
  WaitNode* pop_front() noexcept {
    WaitNode* n = head_;
    if (n) remove(n);
    return n;
  }
  void remove(WaitNode* n) noexcept {
    (n->prev ? n->prev->next : head_) = n->next;
    (n->next ? n->next->prev : tail_) = n->prev;
    n->prev = n->next = nullptr;
    n->linked = false;
  }

 private:
  WaitNode* head_ = nullptr;
  WaitNode* tail_ = nullptr;
};

}  // namespace weft::detail
