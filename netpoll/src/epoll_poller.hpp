// EpollPoller: the runtime's poller (weft/detail/poller.hpp) on one process-wide epoll instance,
// edge-triggered, each fd registered once for both directions (poll_desc.hpp).
//
// The scheduler lets one worker at a time block in poll(); any thread interrupts it through an
// eventfd (Go's netpollBreak); the scheduler sends at most one wakeup per blocking poll
// (Runtime::poller_woken_), except wake_all() at shutdown.
// poll() returns the fibers whose readiness arrived; the scheduler places them.
//
// Installing: linking any net call links this file, whose static initialiser registers the
// factory, so every run() in a program that uses weft::net gets the epoll poller. Creating one
// also raises RLIMIT_NOFILE's soft limit to the hard limit and ignores SIGPIPE (if it still has
// its default action), as Go's runtime does.
#pragma once

namespace weft::net::detail {

// The process-wide epoll fd (created on first use; aborts with a message if epoll is unusable).
int epoll_instance();

}  // namespace weft::net::detail
