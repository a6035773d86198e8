// The poller interface: the scheduler's idle hook (Go's netpoll). When a worker has nothing to
// run it calls poll() with the time until the earliest timer; the poller blocks until an I/O
// event, wakeup() or that timeout, and returns the fibers it made runnable. The poller never
// touches run queues: the scheduler places what it returns. At most one worker is inside a
// blocking poll() at a time; wakeup() interrupts it when new work or an earlier timer appears.
// netpoll installs an epoll poller; the runtime's default just sleeps on a condition variable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/detail/fiber_list.hpp"

namespace weft::detail {

class Poller {
 public:
  virtual ~Poller() = default;
  // timeout_ns: -1 waits without limit, 0 only collects what is ready now.
  virtual void poll(std::int64_t timeout_ns, FiberList& ready) = 0;
  // Makes a concurrent or the next blocking poll() return soon. Any thread; async-safe enough to
  // call with scheduler locks held.
  virtual void wakeup() noexcept = 0;
  // Fibers parked on the poller right now. While this is non-zero, a future event may wake a
  // fiber, so deadlock detection stays quiet.
  virtual std::size_t waiters() const noexcept = 0;
  // Hands operations queued since the last poll to the kernel (a completion-based poller
  // batches them); the scheduler calls it before a worker goes idle and from busy workers'
  // periodic poll check, so nothing queued waits for the next poll. Any worker, any time.
  virtual void flush() noexcept {}
  // The backend's name for Stats::netpoll ("epoll", "io_uring", "none").
  virtual const char* name() const noexcept = 0;
};

// The poller run() installs for its runtime, given Options::netpoll (weft::NetPoll as a byte, so
// this header needs no runtime.hpp), the worker count and whether stack hibernation is asked for
// (Options::hibernate_after > 0); null restores the default condvar poller. The factory may throw
// std::runtime_error (a backend asked for explicitly that cannot run here): run() fails.
using PollerFactory = std::unique_ptr<Poller> (*)(std::uint8_t netpoll, unsigned workers,
                                                  bool hibernation);
void set_poller_factory(PollerFactory factory) noexcept;

}  // namespace weft::detail
