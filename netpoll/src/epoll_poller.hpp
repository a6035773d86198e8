// EpollPoller: the runtime's poller (weft/detail/poller.hpp) on one process-wide epoll instance,
// edge-triggered, each fd registered once for both directions (poll_desc.hpp).
//
// The scheduler lets one worker at a time block in poll(); any thread interrupts it through an
// eventfd (Go's netpollBreak); the scheduler sends at most one wakeup per blocking poll
// (Runtime::poller_woken_), except wake_all() at shutdown.
// poll() returns the fibers whose readiness arrived; the scheduler places them.
//
// Installing: uring_poller.cpp's factory (the backend choice) is registered by this file's static
// initialiser, which every net call links; either backend first calls netpoll_prepare_process(),
// which raises RLIMIT_NOFILE's soft limit to the hard limit and ignores SIGPIPE (if it still has
// its default action), as Go's runtime does. The io_uring backend nests this epoll instance in
// its ring and harvests it with epoll_wait_dispatch.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <memory>

#include "weft/detail/poller.hpp"

namespace weft::net::detail {

void netpoll_prepare_process();
std::unique_ptr<weft::detail::Poller> make_epoll_poller();
// One epoll_pwait2 (epoll_wait where the kernel lacks it; timeout_ns: -1 without limit, 0 only
// what is ready) whose events become edges on their descriptors (fibers woken go on `ready`).
// Returns the number of events.
int epoll_wait_dispatch(epoll_event* events, int max_events, std::int64_t timeout_ns,
                        weft::detail::FiberList& ready);
// Interrupts a wait on the epoll instance (its eventfd).
void epoll_wakeup() noexcept;

// The process-wide epoll fd (created on first use; aborts with a message if epoll is unusable).
int epoll_instance();

}  // namespace weft::net::detail
