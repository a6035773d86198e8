// The queued recv of the io_uring backend; design in poll_desc.hpp ("Queued reads").
//
// Invariants: at most one recv is in flight per side (the slot admits one waiter; a second
// reader gets kBusy), and poll_queued_recv never returns while its recv is in flight -- the
// kernel writes into the caller's buffer, which lives in the caller's frame. The completion
// publishes op_res with op_done (seq_cst) before it reads the slot; the fiber publishes kOpWait
// (seq_cst CAS) before it reads op_done: one of them sees the other, so a completion is never
// missed between "check" and "park". While a recv is in flight its fiber is never hibernated
// (weft/detail/kernel_writes_stack.hpp): the kernel's copy would fault on the released stack
// from inside the worker's next system call.
#include "poll_op.hpp"

#include <liburing.h>

#include <cerrno>
#include <weft/runtime.hpp>

#include "desc_table.hpp"
#include "weft/detail/kernel_writes_stack.hpp"
#include "weft/detail/park.hpp"
#include "weft/detail/wait_bounds.hpp"

namespace weft::net::detail {
namespace {

using weft::detail::WaitReason;

constexpr std::uint32_t kGenMask = 0x7fffffffu;

std::uint64_t op_token(const PollDesc* pd, Mode m, std::uint32_t gen) noexcept {
  return (static_cast<std::uint64_t>(pd->index) << 32) |
         (static_cast<std::uint64_t>(m == Mode::kWrite) << 31) | (gen & kGenMask);
}

struct OpCommit {
  std::atomic<std::uintptr_t>* slot;
  std::uintptr_t me;  // Waker bits | kOpTag
  bool committed = false;
  static bool run(void* a) {
    auto* c = static_cast<OpCommit*>(a);
    c->committed = true;
    std::uintptr_t expected = PollDesc::kOpWait;
    // Fails if the completion or an unblock emptied the slot since kOpWait: don't park.
    return c->slot->compare_exchange_strong(expected, c->me, std::memory_order_seq_cst);
  }
};

// Publishes kOpWait for the next park. False if the slot holds something else (a select armed on
// this side by another fiber between an unblock and now): the caller then yields instead.
bool publish_op_wait(PollDesc::Side& s) noexcept {
  std::uintptr_t old = s.slot.load(std::memory_order_acquire);
  for (;;) {
    if (old == PollDesc::kOpWait) return true;
    if (old != PollDesc::kEmpty && old != PollDesc::kReady) return false;
    if (s.slot.compare_exchange_weak(old, PollDesc::kOpWait, std::memory_order_seq_cst)) {
      return true;
    }
  }
}

void clear_op_wait(PollDesc::Side& s) noexcept {
  std::uintptr_t expected = PollDesc::kOpWait;
  s.slot.compare_exchange_strong(expected, PollDesc::kEmpty, std::memory_order_acq_rel);
}

}  // namespace

QueuedRecv poll_queued_recv(UringRing& ring, PollDesc* pd, void* buf, std::size_t n,
                            bool poll_first, const weft::CancelToken& bound) {
  PollDesc::Side& s = pd->rd;
  const std::uint32_t seq = pd->seq.load(std::memory_order_acquire);
  const int fd = pd->fd;
  weft::detail::WaitBounds bounds(
      bound, [](void* side) { poll_unblock(*static_cast<PollDesc::Side*>(side)); }, &s);
  struct Disarm {
    weft::detail::WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  if (!bounds.arm()) return {bound_result(bounds.fired()), 0};
  // Take the side: empty, or holding an edge epoll recorded earlier (the recv reads that data).
  for (;;) {
    if (WaitResult e = poll_check(pd, s, seq, bounds); e != WaitResult::kReady) return {e, 0};
    std::uintptr_t old = s.slot.load(std::memory_order_acquire);
    if (old != PollDesc::kEmpty && old != PollDesc::kReady) return {WaitResult::kBusy, 0};
    if (s.slot.compare_exchange_strong(old, PollDesc::kOpWait, std::memory_order_seq_cst)) break;
  }
  // Close and deadline setters store first, then unblock: re-check after publishing.
  if (WaitResult e = poll_check(pd, s, seq, bounds); e != WaitResult::kReady) {
    clear_op_wait(s);
    return {e, 0};
  }
  s.op_done.store(false, std::memory_order_relaxed);
  const std::uint32_t gen = s.op_gen.load(std::memory_order_relaxed) + 1;
  s.op_gen.store(gen, std::memory_order_release);
  const std::uint64_t token = op_token(pd, Mode::kRead, gen);
  // Until this returns the kernel may write into buf, in this frame: no hibernation meanwhile.
  const weft::detail::KernelWritesStack kernel_writes;
  ring.queue([&](io_uring_sqe* sqe) {
    io_uring_prep_recv(sqe, fd, buf, n, 0);
    if (poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, token);
  });
  WaitResult outcome = WaitResult::kReady;  // why we cancelled, if we did
  poll_waiters_add(1);
  for (;;) {
    if (s.op_done.load(std::memory_order_seq_cst)) break;
    OpCommit commit{&s.slot, Waker::current().bits() | PollDesc::kOpTag};
    try {
      weft::detail::park(&OpCommit::run, &commit, WaitReason::kIoRead, fd);
    } catch (...) {
      // FiberUnwind at shutdown: the frame (and buf) goes now, so the kernel must be done with
      // the recv first. A synchronous cancel returns once it is; the completion it leaves is
      // made stale by the generation bump (no new recv starts on a runtime that is stopping).
      poll_waiters_add(-1);
      if (!s.op_done.load(std::memory_order_seq_cst)) {
        ring.cancel_now(token);
        s.op_gen.store(gen + 1, std::memory_order_release);
      }
      std::uintptr_t expected = commit.committed ? commit.me : PollDesc::kOpWait;
      s.slot.compare_exchange_strong(expected, PollDesc::kEmpty, std::memory_order_acq_rel);
      throw;
    }
    if (s.op_done.load(std::memory_order_seq_cst)) break;
    // Woken without a completion: an unblock (close, the deadline, a bound), or one that ended
    // nothing (a deadline moved later meanwhile). Publish kOpWait again first, then check: a
    // close that lands after the check finds kOpWait and wakes us (as after the first publish).
    // Cancel once; then wait for the completion whatever else happens.
    if (!publish_op_wait(s)) weft::this_fiber::yield();
    if (outcome == WaitResult::kReady) {
      outcome = poll_check(pd, s, seq, bounds);
      if (outcome != WaitResult::kReady) {
        ring.queue([&](io_uring_sqe* sqe) {
          io_uring_prep_cancel64(sqe, token, 0);
          io_uring_sqe_set_data64(sqe, kUringIgnoreToken);
        });
        ring.flush();  // a cancellation is answered promptly, not at the next batch
      }
    }
  }
  poll_waiters_add(-1);
  clear_op_wait(s);  // the completion may have found kOpWait and left it for us
  const std::int32_t res = s.op_res;
  if (outcome != WaitResult::kReady && res == -ECANCELED) return {outcome, 0};
  return {WaitResult::kReady, res};  // data that won the race with a cancel is returned
}

void poll_op_complete(std::uint64_t token, std::int32_t res,
                      weft::detail::FiberList& ready) noexcept {
  PollDesc* pd = desc_at(static_cast<std::uint32_t>(token >> 32));
  if (!pd) return;
  PollDesc::Side& s = (token >> 31) & 1 ? pd->wr : pd->rd;
  if ((s.op_gen.load(std::memory_order_acquire) & kGenMask) != (token & kGenMask)) return;
  s.op_res = res;
  s.op_done.store(true, std::memory_order_seq_cst);
  std::uintptr_t old = s.slot.load(std::memory_order_seq_cst);
  for (;;) {
    if (!PollDesc::is_op(old)) return;  // unblocked: the fiber is awake and sees op_done
    if (s.slot.compare_exchange_weak(old, PollDesc::kEmpty, std::memory_order_seq_cst)) break;
  }
  if (old == PollDesc::kOpWait) return;  // not parked yet: its commit fails
  weft::detail::Fiber* f = Waker::from_bits(old & ~PollDesc::kOpTag).fiber();
  ready.push_back(f);
}

}  // namespace weft::net::detail
