// IntrusiveList: the one doubly linked list of wait records in weft. Every primitive that queues
// parked callers (sync's WaitList, a channel's send and receive queues) uses it. Nodes live in
// the waiters' own frames and carry their links (`prev`, `next`, `linked`); the list never
// allocates and never owns a node. Not thread-safe: the owning primitive's lock guards the list
// and the links of every node while it is linked.
#pragma once

#include "weft/detail/assert.hpp"

namespace weft::detail {

// Node: any struct with `Node* prev; Node* next; bool linked;`.
template <class Node>
class IntrusiveList {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  Node* front() const noexcept { return head_; }
  void push_back(Node* n) noexcept {
    WEFT_ASSERT(!n->linked, "a wait record is queued twice");
    n->prev = tail_;
    n->next = nullptr;
    (tail_ ? tail_->next : head_) = n;
    tail_ = n;
    n->linked = true;
  }
  void push_front(Node* n) noexcept {
    WEFT_ASSERT(!n->linked, "a wait record is queued twice");
    n->prev = nullptr;
    n->next = head_;
    (head_ ? head_->prev : tail_) = n;
    head_ = n;
    n->linked = true;
  }
  Node* pop_front() noexcept {
    Node* n = head_;
    if (n) remove(n);
    return n;
  }
  void remove(Node* n) noexcept {
    WEFT_ASSERT(n->linked, "removing a wait record that is not queued");
    (n->prev ? n->prev->next : head_) = n->next;
    (n->next ? n->next->prev : tail_) = n->prev;
    n->prev = n->next = nullptr;
    n->linked = false;
  }

 private:
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
};

}  // namespace weft::detail
