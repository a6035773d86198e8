// IntrusiveList: the one intrusive list of weft. Every queue of records that live elsewhere uses
// it: sync's WaitList, a channel's send and receive queues (WaiterQueue), the callbacks of a
// CancelSignal, the list of grown channel rings, and the scheduler's and pollers' lists of fibers
// (FiberList). Nodes carry their own links; the list never allocates and never owns a node. Not
// thread-safe: whoever owns the list (a primitive's lock, a worker's thread) guards it and the
// links of every node while it is linked.
//
// Two ways to link, chosen by the second parameter; both are FIFO through push_back/pop_front:
//  - DoublyLinked (the default): through the node's `Node* prev; Node* next; bool linked;`.
//    push_front and O(1) remove() of any linked node, which a waiter that withdraws (a timeout,
//    an unwind) needs; `linked` says whether it still is. Not counted.
//  - SinglyLinked<Next>: through the `Node*&` that `Next::next(Node*)` returns (a function, so
//    that code which cannot see the node's definition -- the pollers and Fiber -- can still list
//    it). push_back and pop_front only; counts its nodes (size()), which the run-queue spill and
//    the retire batches read. A fiber is on one such list at a time.
#pragma once

#include <cstddef>
#include <type_traits>

#include "weft/detail/assert.hpp"

namespace weft::detail {

struct DoublyLinked {};
template <class Next>
struct SinglyLinked {
  using Hook = Next;
};

template <class Node, class Links = DoublyLinked>
class IntrusiveList {
  static constexpr bool kDoubly = std::is_same_v<Links, DoublyLinked>;
  struct NoCount {};

 public:
  bool empty() const noexcept { return head_ == nullptr; }
  Node* front() const noexcept { return head_; }
  std::size_t size() const noexcept requires(!kDoubly) { return size_; }

  void push_back(Node* n) noexcept {
    if constexpr (kDoubly) {
      WEFT_ASSERT(!n->linked, "a wait record is queued twice");
      n->prev = tail_;
      n->next = nullptr;
      (tail_ ? tail_->next : head_) = n;
      n->linked = true;
    } else {
      next_of(n) = nullptr;
      (tail_ ? next_of(tail_) : head_) = n;
      ++size_;
    }
    tail_ = n;
  }
  void push_front(Node* n) noexcept requires kDoubly {
    WEFT_ASSERT(!n->linked, "a wait record is queued twice");
    n->prev = nullptr;
    n->next = head_;
    (head_ ? head_->prev : tail_) = n;
    head_ = n;
    n->linked = true;
  }
  Node* pop_front() noexcept {
    Node* n = head_;
    if constexpr (kDoubly) {
      if (n) remove(n);
    } else if (n) {
      head_ = next_of(n);
      if (!head_) tail_ = nullptr;
      next_of(n) = nullptr;
      --size_;
    }
    return n;
  }
  void remove(Node* n) noexcept requires kDoubly {
    WEFT_ASSERT(n->linked, "removing a wait record that is not queued");
    (n->prev ? n->prev->next : head_) = n->next;
    (n->next ? n->next->prev : tail_) = n->prev;
    n->prev = n->next = nullptr;
    n->linked = false;
  }

 private:
  static Node*& next_of(Node* n) noexcept requires(!kDoubly) { return Links::Hook::next(n); }

  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  [[no_unique_address]] std::conditional_t<kDoubly, NoCount, std::size_t> size_{};
};

}  // namespace weft::detail
