// PollDesc: the per-fd readiness record (Go's pollDesc), shared by the epoll poller and the
// blocking-style net calls.
//
// Slots. Each direction (read, write) has one word:
//   kEmpty   nothing known;
//   kReady   an edge arrived and nobody consumed it yet;
//   kWait    a fiber is between "the syscall said EAGAIN" and "parked" (it re-checks errors);
//   hook     a parked select's SelectHook for this side (case_readable / case_writable), tagged
//            with kHookTag in its low bits;
//   other    the parked fiber's Waker bits.
// The waiter goes kEmpty -> kWait, re-checks close/deadline, then parks; its commit CASes
// kWait -> Waker. An edge (ready()) sets kReady whatever the slot holds, waking a parked waiter;
// a deadline or close (unblock()) sets kEmpty, waking a parked waiter. Either one landing on kWait
// makes the commit's CAS fail, so the fiber does not park and re-checks: no edge and no deadline
// is ever lost between "try the syscall" and "park". A woken waiter takes only kReady from the
// slot and never overwrites it: once it was woken, the side may already belong to someone else
// (a select arms from kEmpty or kReady; select_cases.cpp).
//
// Reuse. Descriptors live in a type-stable table (desc_table.hpp) and are never destroyed, so an
// epoll event that arrives after its fd was closed never touches freed memory. Each registration
// carries (index, seq) in epoll's data; every use of a descriptor gets a seq of its own and a
// closed one has seq 0, so a stale event for a closed (and maybe reused) fd is recognised and
// dropped, and a fiber that waited on the old fd sees the change and fails with "closed". The
// table gives the pages of free descriptors back after a burst: a page read back as zeros is
// free descriptors, and poll_open sets every field a use depends on.
//
// Close and calls in flight (Go's fdMutex, simplified): `refs` counts the owner (the Socket) plus
// every call in progress. close() marks `closing`, wakes waiters and drops the owner's reference;
// whoever drops the last one unregisters, closes the fd and recycles the descriptor. So an fd
// number is never released (and reused by an unrelated socket) while a call on it is still in a
// syscall or about to make one. A call takes its reference only from a live count (a count at
// zero is a descriptor closed and freed, or being freed).
//
// Short reads (TCP streams only). A read that returns fewer bytes than asked left the socket's
// receive queue empty, and edge-triggered epoll reports every byte that arrives after that, so
// the next read waits for that edge (or one already recorded as kReady) instead of first making
// a read() that would only say EAGAIN: one syscall less per request in request/response traffic.
// `rd_drained` records it. "Short means nothing more to read" fails in three cases, which all
// keep the plain path: Unix streams (a read stops at a message carrying fds or credentials;
// `short_read_drains` is set only for TCP streams), TCP urgent data (a read stops at the urgent
// mark), and an end of stream or error that arrived with the data (the read returns the data;
// the next one would return 0 or the error at once, with no further edge). For the last two the
// poller sees EPOLLPRI / EPOLLRDHUP / EPOLLHUP / EPOLLERR and sets `short_read_unreliable` for
// good before it wakes the reader; an edge that comes later is still to be harvested and wakes
// the reader anyway.
//
// Bounds. A wait also ends when its call's CancelToken or the fiber's stop request fires: a
// WaitBounds armed for the wait unblocks the side, and the re-check sees it.
//
// Contexts (Socket::set_context). A socket's context is bound to its descriptor once, not to
// each wait: `ctx_cb` stays attached to the context's signal while the socket is bound, and when
// the context is done it records why in `ctx_why` and unblocks both sides. Calls check `ctx_why`
// (before the syscall, and in every wait's re-check) with one load: a call on a bound socket
// copies no Context and attaches nothing, so the many connections of one server, all bound to
// the server's one context, never meet on its signal's lock or its reference count.
// poll_bind_context changes the binding (the owning Socket serialises it, and unbinds before the
// descriptor is closed, so a recycled descriptor starts unbound).
//
// Queued reads (the io_uring backend, poll_op.cpp). A stream read that would wait submits a recv
// into the caller's buffer instead and parks on the read side with two more slot states:
//   kOpWait  a recv is in flight and its fiber is between "submitted" and "parked";
//   op       the parked fiber's Waker bits | kOpTag (fibers only: their bits end in 00).
// The recv's completion stores op_res, sets op_done, and empties the slot (waking the fiber).
// An edge leaves these states alone (the recv consumes the data); an unblock (close, deadline,
// bound) empties the slot and wakes the fiber, which then cancels the recv and waits for its
// completion before it returns, because the kernel writes into the caller's buffer until then.
// op_gen tells a completion for this side's current recv from a stale one (a recv withdrawn at
// shutdown with a synchronous cancel). Streams of the io_uring backend register with epoll
// without EPOLLIN (`read_interest` false), so data arriving for a queued recv costs no epoll
// event; a readiness wait for reading (select's case_readable, wait_readable, TLS) turns it on
// for good first (poll_want_reads).
//
// Deadlines (Go semantics: absolute times that stay until changed) live here too, each with a
// runtime TimerEntry in the descriptor; deadline_mu serialises setters; the timer callback only
// marks the deadline expired and unblocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "weft/cancel.hpp"
#include "weft/detail/chan_core.hpp"
#include "weft/detail/park.hpp"
#include "weft/detail/poller.hpp"
#include "weft/detail/wait_bounds.hpp"

namespace weft::net::detail {

using weft::detail::TimerEntry;
using weft::detail::Waker;

enum class Mode : std::uint8_t { kRead, kWrite };

enum class WaitResult : std::uint8_t {
  kReady,      // try the syscall again
  kClosed,     // the descriptor was closed (maybe by another fiber)
  kDeadline,   // the side's deadline passed
  kBusy,       // another fiber already waits on this side (two readers of one socket)
  kCancelled,  // the call's context was cancelled (its deadline passing gives kDeadline)
  kStopped,    // the calling fiber's Task::request_stop() was called
};

struct PollDesc {
  static constexpr std::uintptr_t kEmpty = 0;
  static constexpr std::uintptr_t kReady = 1;
  static constexpr std::uintptr_t kWait = 2;
  static constexpr std::uintptr_t kOpWait = 3;
  static constexpr std::uintptr_t kOpTag = 3;
  static bool is_op(std::uintptr_t v) noexcept { return v == kOpWait || (v & 3) == kOpTag; }
  static constexpr std::int64_t kExpired = -1;
  // A SelectHook's address | kHookTag. Waker bits end in 0 (a fiber) or 1 (a plain thread) in
  // bit 0 with bit 1 clear, and objects are 8-aligned, so the tag is unambiguous.
  static constexpr std::uintptr_t kHookTag = 2;
  static bool is_hook(std::uintptr_t v) noexcept { return v > kWait && (v & 3) == kHookTag; }
  static weft::detail::SelectHook* hook_of(std::uintptr_t v) noexcept {
    return reinterpret_cast<weft::detail::SelectHook*>(v & ~std::uintptr_t{3});
  }
  static std::uintptr_t hook_bits(weft::detail::SelectHook* h) noexcept {
    return reinterpret_cast<std::uintptr_t>(h) | kHookTag;
  }

  struct Side {
    std::atomic<std::uintptr_t> slot{kEmpty};
    std::atomic<std::int64_t> deadline{0};  // 0: none; kExpired: passed; else steady ns
    TimerEntry timer;                       // armed while deadline > 0
    // The queued recv of this side (see "Queued reads"); written by its fiber before it submits,
    // op_res/op_done by the completion.
    std::atomic<std::uint32_t> op_gen{0};
    std::atomic<bool> op_done{false};
    std::int32_t op_res = 0;  // published by op_done
  };

  int fd = -1;
  std::uint32_t index = 0;            // position in the descriptor table
  std::atomic<std::uint32_t> seq{0};  // this use's (desc_table.hpp "Seqs"); 0 when free
  std::atomic<bool> closing{false};
  std::atomic<std::uint32_t> refs{0};  // owner + calls in flight; the last one out finishes
  bool owns_fd = true;                 // false for wait_readable/wait_writable's foreign fds
  bool short_read_drains = false;      // a TCP stream (set by its creator before any read)
  std::atomic<bool> short_read_unreliable{false};  // urgent data, end of stream or error seen
  std::atomic<bool> rd_drained{false};    // the last read was short: the queue was empty then
  std::atomic<bool> read_interest{true};  // registered with EPOLLIN (see "Queued reads")
  Side rd, wr;
  // The context binding (see "Contexts"): written by poll_bind_context, under the owning
  // Socket's ctx_mu_; ctx_why also by ctx_cb's fire, and read by every call.
  weft::detail::CancelCallback ctx_cb;
  weft::detail::CancelSignal* ctx_sig = nullptr;  // the bound context's, or null
  std::atomic<int> ctx_why{0};  // a CancelSignal::Why once the bound context is done; 0 before
  std::mutex deadline_mu;       // serialises deadline setters (never held by a timer)

  Side& side(Mode m) noexcept { return m == Mode::kRead ? rd : wr; }
};

// Registers fd (already non-blocking) with epoll, edge-triggered for both directions; the caller
// holds the owner reference. Returns null with errno set on failure (the fd is left open).
// `queued_reads`: a stream whose reads the io_uring backend queues; it registers without EPOLLIN.
PollDesc* poll_open(int fd, bool owns_fd = true, bool queued_reads = false);
// Readiness waits for reading need EPOLLIN: turns it on (once, for good) for a queued-reads
// stream. Called by every read-side readiness wait before it looks at the slot.
void poll_want_reads(PollDesc* pd) noexcept;
// Wakes every waiter with "closed", disarms the deadlines and drops the owner reference; the fd
// is closed (if owned) and the descriptor recycled when the last call in flight has left.
void poll_close(PollDesc* pd);
// A call in flight: false if the descriptor is closing (the call must fail with "closed").
bool poll_io_begin(PollDesc* pd) noexcept;
void poll_io_end(PollDesc* pd) noexcept;

// Binds the descriptor to `sig` (a context's signal; null unbinds), replacing the binding it
// had: detaches from the old signal (waiting for a callback running now), clears ctx_why, and
// attaches -- recording why at once if `sig` has fired. Rebinding to the same signal keeps the
// binding. The owning Socket's ctx_mu_ serialises calls; blocked calls are not woken by it.
void poll_bind_context(PollDesc* pd, weft::detail::CancelSignal* sig) noexcept;

// Parks the calling fiber (fibers only) until `mode` is ready, the descriptor is closed, the
// side's deadline passes, its bound context is done (see "Contexts"), or a bound fires:
// `bound` (a call's own CancelToken: a handshake's timeout, a wait_readable token) or the
// fiber's stop request. A bound that fires empties the slot as a deadline does (unblock), so the
// waiter re-checks and sees it; no edge is consumed by it.
WaitResult poll_wait(PollDesc* pd, Mode mode, const weft::CancelToken& bound = {});
// What a fired bound (a CancelSignal::Why) means to a net call; kReady for none.
WaitResult bound_result(int why) noexcept;
// Sets the descriptor's deadline for `mode` (0 clears it); a waiter is woken to re-check.
void poll_set_deadline(PollDesc* pd, Mode mode, std::int64_t deadline_ns);

// Poller side: an edge for `mode`; a parked fiber, if any, is added to `ready`.
void poll_ready(PollDesc* pd, Mode mode, weft::detail::FiberList& ready) noexcept;
// Epoll data for a descriptor, and back. Null when the event is stale.
std::uint64_t poll_token(const PollDesc* pd) noexcept;
PollDesc* poll_from_token(std::uint64_t token) noexcept;

// Fibers parked in poll_wait() or on a queued operation right now (the poller's waiters()).
std::size_t poll_waiters() noexcept;
void poll_waiters_add(std::ptrdiff_t n) noexcept;
// The shared pieces of every wait on a side (poll_wait, the queued recv of poll_op.cpp):
// close/recycle, the bound context, a fired bound, or the side's deadline, else kReady.
WaitResult poll_check(PollDesc* pd, PollDesc::Side& s, std::uint32_t seq,
                      const weft::detail::WaitBounds& bounds) noexcept;
// A wait on side `s` would end at once: the descriptor is closing, its bound context is done, or
// the side's deadline has expired (the flags that close, the context and the deadline timer set
// before they unblock the side).
bool poll_side_ended(const PollDesc* pd, const PollDesc::Side& s) noexcept;
// A deadline, close or fired bound: empties the slot, waking (or firing) what waits there.
void poll_unblock(PollDesc::Side& s) noexcept;

}  // namespace weft::net::detail
