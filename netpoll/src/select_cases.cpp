// case_readable / case_writable (weft/net.hpp): a socket direction as a select source
// (weft/detail/chan_core.hpp's SelectSource).
//
// ready_now: the descriptor is closing, bound to a done context or past the side's deadline
// (poll_side_ended), or poll(2) with a zero timeout says so. Not a recorded edge: one may be
// stale (a dialled socket is registered before connect() and reports a hang-up edge on both
// sides), and data an earlier read left behind has no new edge anyway.
// arm: takes a descriptor reference (so a close cannot recycle it while the hook is there) and
// publishes the hook in the side's slot by CAS from kEmpty -- or from kReady, after which it asks
// poll(2): really ready puts the edge back and reports "ready" (unless an edge or an unblock took
// the hook meanwhile, which fires it); not ready means the edge was stale, and the hook waits for
// the next one. Another waiter in the slot (busy) makes it report "ready": the call then reports
// the conflict. An edge or an unblock (close, deadline, the bound context) that finds the hook
// takes it and fires it (poll_desc.cpp); one that came before the hook was published is seen by
// the re-check after it (poll_side_ended), which takes the hook back and reports ready.
// disarm: CAS hook -> kEmpty; when that fails the hook was taken, and we wait until its fire
// returned. The edge that fired a losing case stays recorded as kReady, so no readiness is lost
// when another case won.
#include <poll.h>

#include "poll_desc.hpp"
#include "weft/net.hpp"

namespace weft::net::detail {
namespace {

using weft::detail::SelectHook;

PollDesc::Side& side_of(const ReadySource* s) noexcept {
  return s->pd->side(s->write ? Mode::kWrite : Mode::kRead);
}

bool current(const ReadySource* s) noexcept {
  return s->pd && s->fd >= 0 && s->pd->seq.load(std::memory_order_acquire) == s->seq;
}

bool fd_ready(const ReadySource* s) noexcept {
  pollfd p{s->fd, static_cast<short>(s->write ? POLLOUT : POLLIN), 0};
  return ::poll(&p, 1, 0) != 0;  // ready, hung up, in error -- or poll failed: let the call say
}

bool ready_now(void* obj) {
  auto* s = static_cast<ReadySource*>(obj);
  if (!current(s) || poll_side_ended(s->pd, side_of(s))) return true;
  return fd_ready(s);
}

bool arm(void* obj, SelectHook* hook) {
  auto* s = static_cast<ReadySource*>(obj);
  if (!s->pd || !poll_io_begin(s->pd)) return false;  // closing: the call will say so
  if (!current(s)) {
    poll_io_end(s->pd);
    return false;
  }
  if (&side_of(s) == &s->pd->rd) poll_want_reads(s->pd);
  std::atomic<std::uintptr_t>& slot = side_of(s).slot;
  const std::uintptr_t mine = PollDesc::hook_bits(hook);
  std::uintptr_t old = slot.load(std::memory_order_acquire);
  for (;;) {
    if (old != PollDesc::kEmpty && old != PollDesc::kReady) {
      poll_io_end(s->pd);  // busy: another fiber waits in this direction; the call reports it
      return false;
    }
    if (slot.compare_exchange_weak(old, mine, std::memory_order_seq_cst)) break;
  }
  // A close, the context or the deadline that ended the side between ready_now() and here found
  // no hook to fire (they set their flag, then unblock; "Ordering" in poll_desc.cpp): take the
  // hook back and report ready.
  if (poll_side_ended(s->pd, side_of(s))) {
    std::uintptr_t expected = mine;
    if (slot.compare_exchange_strong(expected, old, std::memory_order_acq_rel)) {  // an edge stays
      poll_io_end(s->pd);
      return false;
    }
    return true;  // an unblock took the hook: it fires; we are armed
  }
  if (old == PollDesc::kReady && fd_ready(s)) {
    // A live edge: put it back for the call, and report ready.
    std::uintptr_t expected = mine;
    if (slot.compare_exchange_strong(expected, PollDesc::kReady, std::memory_order_acq_rel)) {
      poll_io_end(s->pd);
      return false;
    }
    // An edge or an unblock took the hook: it fires; we are armed.
  }
  return true;  // the reference is held until disarm
}

void disarm(void* obj, SelectHook* hook) {
  auto* s = static_cast<ReadySource*>(obj);
  std::uintptr_t mine = PollDesc::hook_bits(hook);
  if (!side_of(s).slot.compare_exchange_strong(mine, PollDesc::kEmpty, std::memory_order_acq_rel)) {
    weft::detail::select_hook_wait(hook);  // an edge or an unblock took it: let its fire finish
  }
  poll_io_end(s->pd);
}

constexpr weft::detail::SelectSource kOps{&ready_now, &arm, &disarm};

}  // namespace

const weft::detail::SelectSource* ready_source_ops() noexcept { return &kOps; }

ReadySource ready_source(const Socket& sock, bool write) noexcept {
  ReadySource s;
  s.pd = sock.pd();
  s.fd = sock.fd();
  s.seq = s.pd ? s.pd->seq.load(std::memory_order_acquire) : 0;
  s.write = write;
  return s;
}

}  // namespace weft::net::detail
