// UringPoller: the io_uring backend of the netpoller (Options::netpoll, $WEFT_NETPOLL).
//
// What io_uring carries. A stream read that would wait (its socket's queue is empty) becomes a
// recv queued on the ring into the caller's buffer (poll_op.cpp): the data arrives already
// copied, and the read() that epoll's readiness model needs after every wake-up is gone. Writes
// stay direct send() calls -- they almost always complete at once, which io_uring would also do
// inline, only after a submission -- and wait for EPOLLOUT on the rare full buffer. Accept,
// connect, UDP, Unix sockets, select's socket cases and foreign fds keep their readiness waits on
// the process's epoll instance, which sits in the ring as one multishot poll: one blocking wait
// (io_uring_enter) covers completions and readiness.
//
// One ring per runtime, shared by its workers:
//   - submission: any worker queues an SQE under sq_mu_ (io_uring's SQ is single-producer).
//     Queued SQEs reach the kernel in batches: at the next poll(), when a worker goes idle
//     (Poller::flush, called by the scheduler), from busy workers' periodic poll check, when 32
//     are pending, and at once while a poll() blocks in the kernel (blocked_: it would not see
//     them). blocked_ and pending_ form a Dekker pair (seq_cst), so an SQE queued as the poller
//     goes to sleep is submitted by one of the two;
//   - completion: only the poller seat (one worker at a time, the scheduler's polling_) reaps
//     the CQ, in poll(); the ring is created with a CQ of 4x the SQ, and IORING_FEAT_NODROP
//     keeps overflowing completions in the kernel until they fit, so none is ever lost.
//
// Task work. A socket recv completes as task work of the thread that submitted it. By default
// the kernel notifies that thread at once (TWA_SIGNAL: an IPI when it is running), which on a
// 2-vCPU host made echo 2.8x slower than epoll (32 us of server CPU per request against 12).
// IORING_SETUP_COOP_TASKRUN drops the IPI and runs the work at the thread's next kernel entry --
// but a thread asleep in a futex never enters, so a completion it owns would wait for
// it. That is safe only where the one thread that submits is also the one that polls: a runtime
// of one worker (fibers run only on workers; the seat is always that worker's; a busy worker
// enters the kernel at its sends, and its periodic poll enters when IORING_SQ_TASKRUN is set).
// So: one worker -> COOP_TASKRUN (measured level with or faster than epoll); several -> the
// default notification, correct everywhere but slower, which is why auto picks epoll for them.
//
// Selection (make_netpoller): epoll when asked; io_uring when asked (run() throws saying why if the
// kernel will not set one up); auto tries io_uring and falls back to epoll with one line on
// stderr naming the cause (seccomp, kernel.io_uring_disabled, an old kernel) -- for a runtime of
// one worker without stack hibernation. auto gives several workers epoll (Task work, above), and
// a runtime that hibernates stacks too: a fiber parked on a queued recv is never hibernated
// (the kernel may write its buffer at any moment; weft/detail/kernel_writes_stack.hpp), so
// under io_uring an idle connection keeps its stack pages -- about 8 KB, against about 1 KB
// hibernated under epoll.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/detail/poller.hpp"

struct io_uring_sqe;

namespace weft::net::detail {

// user_data of a CQE: an operation on a descriptor side, or one of these.
inline constexpr std::uint64_t kUringEpollToken = ~std::uint64_t{0};       // the nested epoll fd
inline constexpr std::uint64_t kUringIgnoreToken = ~std::uint64_t{0} - 1;  // cancel requests

class UringRing {
 public:
  // Queues one SQE: `prep` fills it under the SQ lock. Never fails: a full SQ is flushed first.
  template <class Prep>
  void queue(Prep&& prep) noexcept {
    io_uring_sqe* sqe = lock_sqe();
    prep(sqe);
    unlock_queued();
  }
  // Hands every queued SQE to the kernel now.
  void flush() noexcept;
  // Cancels the operation with this user_data and returns once the kernel no longer runs it
  // (IORING_REGISTER_SYNC_CANCEL): for a fiber that must leave a recv's frame at once.
  void cancel_now(std::uint64_t user_data) noexcept;

 protected:
  io_uring_sqe* lock_sqe() noexcept;
  void unlock_queued() noexcept;
};

// The poller factory (weft/detail/poller.hpp) for Options::netpoll: installed by epoll_poller.cpp's
// static initialiser, which every net call links (through poll_desc.cpp's epoll_instance()).
std::unique_ptr<weft::detail::Poller> make_netpoller(std::uint8_t choice, unsigned workers,
                                                     bool hibernation);

// The ring of the running runtime's io_uring poller, or null (epoll, or no runtime).
UringRing* uring_ring() noexcept;

}  // namespace weft::net::detail
