// FiberList: a FIFO of fibers through Fiber::next (core/fiber.hpp), owned by whoever holds it: a
// worker's spill list and retire batches, and the fibers a poller made runnable (poller.hpp). A
// fiber is on at most one such list, and on none while it sits in a run queue's ring. The link is
// reached through FiberNext::next, defined in core/fiber.cpp, so that the pollers (netpoll), which
// do not see the Fiber record, can list fibers too.
#pragma once

#include "weft/detail/intrusive_list.hpp"

namespace weft::detail {

struct Fiber;

struct FiberNext {
  static Fiber*& next(Fiber* f) noexcept;
};

using FiberList = IntrusiveList<Fiber, SinglyLinked<FiberNext>>;

}  // namespace weft::detail
