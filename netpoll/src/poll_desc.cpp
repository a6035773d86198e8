// Descriptor table, wait/ready protocol and deadlines; design in poll_desc.hpp.
#include "poll_desc.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "desc_table.hpp"
#include "epoll_poller.hpp"
#include "weft/detail/assert.hpp"
#include "weft/detail/wait_bounds.hpp"

namespace weft::net::detail {
namespace {

using weft::detail::WaitReason;

std::atomic<std::size_t> g_waiters{0};

// A deadline or close: empty the slot, waking a parked waiter so that it re-checks (a select
// waiting on the side fires its case: the caller's next call reports the error).
//
// Ordering. Whoever unblocks stores its flag first (closing, ctx_why, deadline = kExpired, a
// wait bound's why: WaitBounds::fire) and then reads the slot; a waiter publishes itself in the
// slot (kWait, a hook) and then reads the flags. Both sides are seq_cst, so at least one of them
// sees the other: the unblocker finds the waiter, or the waiter finds the flag (store buffering
// would otherwise let both miss).
void unblock(PollDesc::Side& s) noexcept {
  std::uintptr_t old = s.slot.load(std::memory_order_seq_cst);
  for (;;) {
    if (old == PollDesc::kReady || old == PollDesc::kEmpty) return;
    if (s.slot.compare_exchange_weak(old, PollDesc::kEmpty, std::memory_order_acq_rel)) break;
  }
  if (old == PollDesc::kWait || old == PollDesc::kOpWait) return;
  if (PollDesc::is_op(old)) {  // a fiber parked on a queued recv: it cancels it
    Waker::from_bits(old & ~PollDesc::kOpTag).wake();
    return;
  }
  if (PollDesc::is_hook(old)) {
    weft::detail::select_hook_fire(PollDesc::hook_of(old));
    return;
  }
  Waker::from_bits(old).wake();
}

void fire_deadline(TimerEntry* t) {
  auto* s = reinterpret_cast<PollDesc::Side*>(reinterpret_cast<char*>(t) -
                                              offsetof(PollDesc::Side, timer));
  s->deadline.store(PollDesc::kExpired, std::memory_order_seq_cst);
  unblock(*s);
}

// Close/recycle, the bound context, or the side's deadline, else kReady.
WaitResult check_desc(PollDesc* pd, PollDesc::Side& s, std::uint32_t seq) noexcept {
  if (pd->closing.load(std::memory_order_seq_cst) ||
      pd->seq.load(std::memory_order_acquire) != seq) {
    return WaitResult::kClosed;
  }
  if (const int why = pd->ctx_why.load(std::memory_order_seq_cst)) return bound_result(why);
  // Only the flag: a deadline that is due but whose timer has not fired yet lets the waiter
  // park, and the timer wakes it (the clock is read once per call, in precheck).
  if (s.deadline.load(std::memory_order_seq_cst) == PollDesc::kExpired) {
    return WaitResult::kDeadline;
  }
  return WaitResult::kReady;
}

WaitResult check_side(PollDesc* pd, PollDesc::Side& s, std::uint32_t seq,
                      const weft::detail::WaitBounds& bounds) noexcept {
  if (WaitResult e = check_desc(pd, s, seq); e != WaitResult::kReady) return e;
  if (const int why = bounds.fired()) return bound_result(why);
  return WaitResult::kReady;
}

struct WaitCommit {
  std::atomic<std::uintptr_t>* slot;
  std::uintptr_t me;
  bool committed = false;
  static bool run(void* a) {
    auto* c = static_cast<WaitCommit*>(a);
    c->committed = true;
    std::uintptr_t expected = PollDesc::kWait;
    // Fails if an edge (kReady) or an unblock (kEmpty) landed since kWait: don't park.
    return c->slot->compare_exchange_strong(expected, c->me, std::memory_order_acq_rel);
  }
};

}  // namespace

PollDesc* poll_open(int fd, bool owns_fd, bool queued_reads) {
  PollDesc* pd = desc_alloc();  // index and seq set; the rest is ours to set
  if (!pd) return nullptr;
  pd->fd = fd;
  pd->owns_fd = owns_fd;
  pd->refs.store(1, std::memory_order_relaxed);
  pd->closing.store(false, std::memory_order_relaxed);
  pd->short_read_drains = false;
  pd->short_read_unreliable.store(false, std::memory_order_relaxed);
  pd->rd_drained.store(false, std::memory_order_relaxed);
  pd->read_interest.store(!queued_reads, std::memory_order_relaxed);
  WEFT_ASSERT(pd->ctx_sig == nullptr, "a descriptor recycled while bound to a context");
  pd->ctx_why.store(0, std::memory_order_relaxed);
  for (PollDesc::Side* s : {&pd->rd, &pd->wr}) {
    s->slot.store(PollDesc::kEmpty, std::memory_order_relaxed);
    s->deadline.store(0, std::memory_order_relaxed);
    s->op_done.store(false, std::memory_order_relaxed);
    // Disarmed by the last close (finish_close checks), or zero bytes from the table.
    s->timer = TimerEntry{};
    s->timer.fire = &fire_deadline;
  }
  epoll_event ev{};
  ev.events =
      queued_reads ? EPOLLOUT | EPOLLET : EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
  ev.data.u64 = poll_token(pd);
  if (epoll_ctl(epoll_instance(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    const int err = errno;
    desc_free(pd);
    errno = err;
    return nullptr;
  }
  return pd;
}

void poll_want_reads(PollDesc* pd) noexcept {
  if (pd->read_interest.load(std::memory_order_acquire)) return;
  if (pd->read_interest.exchange(true, std::memory_order_acq_rel)) return;
  // A concurrent second caller may look at the slot before this MOD lands; the edge the MOD
  // queues for data already there (epoll re-checks readiness on MOD) reaches it anyway.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
  ev.data.u64 = poll_token(pd);
  epoll_ctl(epoll_instance(), EPOLL_CTL_MOD, pd->fd, &ev);
}

namespace {
// The last reference is gone: nothing uses the fd any more.
void finish_close(PollDesc* pd) {
  epoll_ctl(epoll_instance(), EPOLL_CTL_DEL, pd->fd, nullptr);
  if (pd->owns_fd) ::close(pd->fd);
  WEFT_ASSERT(pd->rd.timer.heap_index == -1 && pd->wr.timer.heap_index == -1,
              "a descriptor freed with a deadline timer armed");
  pd->fd = -1;
  desc_free(pd);  // seq 0: every token for it is stale
}
}  // namespace

bool poll_io_begin(PollDesc* pd) noexcept {
  // Only from a live count: at zero the descriptor is closed and freed (or being freed), and an
  // increment from there would close and free it a second time. A recycled descriptor's count
  // is live again; the callers see that it is no longer theirs (seq, or the socket's pd).
  std::uint32_t n = pd->refs.load(std::memory_order_relaxed);
  do {
    if (n == 0) return false;
  } while (!pd->refs.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel,
                                           std::memory_order_relaxed));
  if (pd->closing.load(std::memory_order_acquire)) {
    poll_io_end(pd);
    return false;
  }
  return true;
}

void poll_io_end(PollDesc* pd) noexcept {
  if (pd->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_close(pd);
}

void poll_close(PollDesc* pd) {
  if (pd->closing.exchange(true, std::memory_order_seq_cst)) return;
  {
    std::lock_guard lock(pd->deadline_mu);
    for (PollDesc::Side* s : {&pd->rd, &pd->wr}) {
      weft::detail::timer_cancel(&s->timer);
      s->deadline.store(0, std::memory_order_relaxed);
    }
  }
  unblock(pd->rd);
  unblock(pd->wr);
  poll_io_end(pd);  // the owner's reference
}

namespace {
// The bound context is done: record why, then wake (or fire) whatever waits on either side.
void on_context_done(weft::detail::CancelCallback* cb) noexcept {
  auto* pd = reinterpret_cast<PollDesc*>(reinterpret_cast<char*>(cb) - offsetof(PollDesc, ctx_cb));
  // ctx_sig is stable here: a rebinding waits in detach() until this callback has returned.
  pd->ctx_why.store(pd->ctx_sig->why(), std::memory_order_seq_cst);  // then unblock: see there
  unblock(pd->rd);
  unblock(pd->wr);
}
}  // namespace

void poll_bind_context(PollDesc* pd, weft::detail::CancelSignal* sig) noexcept {
  if (pd->ctx_sig == sig) return;
  if (pd->ctx_sig) pd->ctx_sig->detach(&pd->ctx_cb);
  pd->ctx_sig = sig;
  pd->ctx_why.store(0, std::memory_order_release);
  if (!sig) return;
  pd->ctx_cb.fire = &on_context_done;
  if (!sig->attach(&pd->ctx_cb)) pd->ctx_why.store(sig->why(), std::memory_order_release);
}

WaitResult bound_result(int why) noexcept {
  switch (why) {
    case weft::detail::CancelSignal::kCancelled:
      return WaitResult::kCancelled;
    case weft::detail::CancelSignal::kDeadline:
      return WaitResult::kDeadline;
    case weft::detail::CancelSignal::kStopped:
      return WaitResult::kStopped;
    default:
      return WaitResult::kReady;
  }
}

WaitResult poll_wait(PollDesc* pd, Mode mode, const weft::CancelToken& bound) {
  weft::detail::require_fiber(mode == Mode::kRead ? "waiting for a readable fd"
                                                  : "waiting for a writable fd");
  PollDesc::Side& s = pd->side(mode);
  const std::uint32_t seq = pd->seq.load(std::memory_order_acquire);
  const int fd = pd->fd;
  if (mode == Mode::kRead) poll_want_reads(pd);
  // An edge recorded already: taken without arming the bounds, as there is nothing to wait for
  // (the caller's syscall comes next; a bound that fired meanwhile fails its next wait).
  if (std::uintptr_t old = s.slot.load(std::memory_order_acquire);
      old == PollDesc::kReady && check_desc(pd, s, seq) == WaitResult::kReady &&
      s.slot.compare_exchange_strong(old, PollDesc::kEmpty, std::memory_order_acq_rel)) {
    return WaitResult::kReady;
  }
  // Armed for the whole call. A bound firing before kWait is published changes nothing in the
  // slot, and the check after publishing sees it; after, unblock() wakes the parked waiter.
  weft::detail::WaitBounds bounds(
      bound, [](void* side) { unblock(*static_cast<PollDesc::Side*>(side)); }, &s);
  struct Disarm {
    weft::detail::WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  if (!bounds.arm()) return bound_result(bounds.fired());
  for (;;) {
    if (WaitResult e = check_side(pd, s, seq, bounds); e != WaitResult::kReady) return e;
    std::uintptr_t old = s.slot.load(std::memory_order_acquire);
    if (old == PollDesc::kReady) {
      if (s.slot.compare_exchange_strong(old, PollDesc::kEmpty, std::memory_order_acq_rel)) {
        return WaitResult::kReady;
      }
      continue;
    }
    if (old != PollDesc::kEmpty) return WaitResult::kBusy;
    if (!s.slot.compare_exchange_strong(old, PollDesc::kWait, std::memory_order_seq_cst)) continue;
    // Close and deadline setters store first, then unblock: re-check after publishing kWait.
    if (WaitResult e = check_side(pd, s, seq, bounds); e != WaitResult::kReady) {
      std::uintptr_t expected = PollDesc::kWait;
      s.slot.compare_exchange_strong(expected, PollDesc::kEmpty, std::memory_order_acq_rel);
      return e;
    }
    WaitCommit commit{&s.slot, Waker::current().bits()};
    g_waiters.fetch_add(1, std::memory_order_relaxed);
    try {
      weft::detail::park(&WaitCommit::run, &commit,
                         mode == Mode::kRead ? WaitReason::kIoRead : WaitReason::kIoWrite, fd);
    } catch (...) {  // FiberUnwind at shutdown: withdraw from the slot
      g_waiters.fetch_sub(1, std::memory_order_relaxed);
      std::uintptr_t expected = commit.committed ? commit.me : PollDesc::kWait;
      s.slot.compare_exchange_strong(expected, PollDesc::kEmpty, std::memory_order_acq_rel);
      throw;
    }
    g_waiters.fetch_sub(1, std::memory_order_relaxed);
    // Woken by an edge (kReady), by unblock (kEmpty), or the park was called off. A descriptor
    // closed meanwhile may already serve another fd: leave its slot alone.
    if (pd->seq.load(std::memory_order_acquire) != seq) return WaitResult::kClosed;
    // The slot no longer names us, so someone else may have taken the side since (a select
    // armed from the edge that woke us, another reader): take only an edge, never overwrite;
    // the loop's top reports anything else as busy.
    std::uintptr_t now = s.slot.load(std::memory_order_acquire);
    if (now == PollDesc::kReady &&
        s.slot.compare_exchange_strong(now, PollDesc::kEmpty, std::memory_order_acq_rel)) {
      return WaitResult::kReady;
    }
  }
}

void poll_set_deadline(PollDesc* pd, Mode mode, std::int64_t deadline_ns) {
  PollDesc::Side& s = pd->side(mode);
  std::lock_guard lock(pd->deadline_mu);
  weft::detail::timer_cancel(&s.timer);  // waits for a running callback
  if (deadline_ns == 0) {
    s.deadline.store(0, std::memory_order_release);
  } else if (deadline_ns <= weft::detail::now_ns()) {
    s.deadline.store(PollDesc::kExpired, std::memory_order_seq_cst);
    unblock(s);
  } else {
    s.deadline.store(deadline_ns, std::memory_order_release);
    s.timer.when_ns = deadline_ns;
    weft::detail::timer_add(&s.timer);
  }
}

void poll_ready(PollDesc* pd, Mode mode, weft::detail::FiberList& ready) noexcept {
  PollDesc::Side& s = pd->side(mode);
  std::uintptr_t old = s.slot.load(std::memory_order_acquire);
  for (;;) {
    // A queued recv takes the data itself: its completion, not this edge, wakes its fiber.
    if (old == PollDesc::kReady || PollDesc::is_op(old)) return;
    if (s.slot.compare_exchange_weak(old, PollDesc::kReady, std::memory_order_acq_rel)) break;
  }
  if (old == PollDesc::kEmpty || old == PollDesc::kWait) return;
  if (PollDesc::is_hook(old)) {  // a select waits: the edge stays recorded for its read
    weft::detail::select_hook_fire(PollDesc::hook_of(old));
    return;
  }
  weft::detail::Fiber* f = Waker::from_bits(old).fiber();
  WEFT_ASSERT(f != nullptr, "a plain thread parked on the netpoller");
  ready.push_back(f);
}

std::uint64_t poll_token(const PollDesc* pd) noexcept {
  return (static_cast<std::uint64_t>(pd->index) << 32) | pd->seq.load(std::memory_order_acquire);
}

PollDesc* poll_from_token(std::uint64_t token) noexcept {
  PollDesc* pd = desc_at(static_cast<std::uint32_t>(token >> 32));
  if (!pd) return nullptr;
  if (pd->seq.load(std::memory_order_acquire) != static_cast<std::uint32_t>(token)) return nullptr;
  return pd;
}

std::size_t poll_waiters() noexcept { return g_waiters.load(std::memory_order_relaxed); }

void poll_waiters_add(std::ptrdiff_t n) noexcept {
  g_waiters.fetch_add(static_cast<std::size_t>(n), std::memory_order_relaxed);
}

WaitResult poll_check(PollDesc* pd, PollDesc::Side& s, std::uint32_t seq,
                      const weft::detail::WaitBounds& bounds) noexcept {
  return check_side(pd, s, seq, bounds);
}

void poll_unblock(PollDesc::Side& s) noexcept { unblock(s); }

bool poll_side_ended(const PollDesc* pd, const PollDesc::Side& s) noexcept {
  return pd->closing.load(std::memory_order_seq_cst) ||
         pd->ctx_why.load(std::memory_order_seq_cst) != 0 ||
         s.deadline.load(std::memory_order_seq_cst) == PollDesc::kExpired;
}

}  // namespace weft::net::detail
