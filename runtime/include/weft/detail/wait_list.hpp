// WaitList: the FIFO of parked waiters behind every weft sync primitive (Go's sema root). Nodes
// live in the waiters' own frames; the owning primitive's SpinLock guards the list and every
// node's fields while the node is linked. A waker unlinks a node, sets its outcome, releases the
// lock and only then wakes it: the node's frame may vanish right after wake().
#pragma once

#include <cstdint>

#include "weft/detail/intrusive_list.hpp"
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

// The FIFO of parked waiters of one primitive.
using WaitList = IntrusiveList<WaitNode>;

}  // namespace weft::detail
