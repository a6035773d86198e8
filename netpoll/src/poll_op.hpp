// Queued operations on a descriptor side (the io_uring backend): the recv that a stream read
// becomes when it would wait. Protocol in poll_desc.hpp, "Queued reads".
#pragma once

#include <cstddef>
#include <cstdint>

#include "poll_desc.hpp"
#include "uring_poller.hpp"

namespace weft::net::detail {

struct QueuedRecv {
  WaitResult wait;   // kReady: the recv completed and `res` is its result
  std::int32_t res;  // bytes (0: end of stream) or -errno
};

// Reads up to n bytes into buf through a recv queued on `ring`, parking until it completes; if
// the descriptor is closed, the side's deadline passes or `bound` fires first, the recv is
// cancelled and waited for, and the outcome says which -- unless the data won the race, which is
// then returned (never dropped). `poll_first`: the queue is known to be empty, so the kernel
// arms its poll before trying (IORING_RECVSEND_POLL_FIRST). Fibers only; the caller holds an
// IoCall on pd.
QueuedRecv poll_queued_recv(UringRing& ring, PollDesc* pd, void* buf, std::size_t n,
                            bool poll_first, const weft::CancelToken& bound);

// A completion whose user_data is an operation token: publishes it and puts the fiber waiting
// for it (if parked) on `ready`. Stale tokens are ignored.
void poll_op_complete(std::uint64_t token, std::int32_t res,
                      weft::detail::FiberList& ready) noexcept;

}  // namespace weft::net::detail
