// Fiber: one allocation holding the runtime's header followed by the closure storage.
//
// Ownership and who may touch what:
//  - `stack_class`: the creator, before fiber_start; read-only afterwards.
//  - `ctx`, `stack`, `eh_*`, `saved_errno`, sanitizer fields: only the worker that is switching
//    this fiber in or out (the fiber is Running there, or being parked by it).
//  - `next`: whoever holds the fiber in a queue (run queue ring slots do not use it; a worker's
//    spill list and the pollers' ready lists do), and after it finished the worker that retires
//    it (Worker::retiring). A fiber is in at most one such list.
//  - `state`: atomic; transitions below, made only by fiber_set_state, fiber_claim_parked and
//    fiber_take_parked. A parked fiber is won with a CAS (fiber_claim_parked) wherever two parties
//    can race for it (a shutdown unwind and a wake), so they cannot both resume it.
//  - `reg_prev/reg_next`, `name`: the registry shard lock (registry.cpp); `reg_shard`: written
//    once before the fiber is registered.
//  - `join_word`: atomic handshake between the finishing fiber and one joiner
//    (sched/fiber_lifecycle.cpp).
//  - `locals`: the fiber itself only (sched/fiber_locals.cpp).
//  - `hibernation`: the hibernator, under its lock; read by the worker switching the fiber in.
//  - `kernel_writes_stack`: the fiber itself (KernelWritesStack); read by the hibernator.
//  - `stop`: thread-safe (weft/detail/cancel_signal.hpp); only the fiber's own waits attach.
//  - `refs`: 1 for the fiber's run (dropped once it ended and left the registry: fiber_retire)
//    + 1 for a Task handle; the last release frees the memory.
//  - wait_* fields, `parked_at_ns`: written by the fiber itself before it parks, read racily by
//    dumps. `track` (and, while it is set, parked_at_ns): the metrics' sampling state, written
//    only by the fiber's owner of the moment (sched/tracking.hpp).
#pragma once

#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/detail/assert.hpp"
#include "weft/detail/cancel_signal.hpp"
#include "weft/detail/fiber_api.hpp"
#include "weft/detail/park.hpp"

namespace weft::detail {

using boost::context::detail::fcontext_t;

//   Created --start--> Runnable --switch in--> Running --park--> Parked --ready--> Runnable
//                                                 |  \--yield--> Runnable
//                                                 \--finish--> Done
enum class FiberState : std::uint8_t { kCreated, kRunnable, kRunning, kParked, kDone };
const char* fiber_state_name(FiberState s) noexcept;

struct Fiber;
struct FiberLocals;
// Runs the closure's release hook and frees the record (the last reference is gone).
void fiber_free(Fiber* f) noexcept;

struct Fiber {
  // Atomics only so that dumps may read them while the fiber runs; every access is relaxed.
  std::atomic<fcontext_t> ctx{nullptr};  // saved context; null until the fiber first runs
  Fiber* next = nullptr;                 // intrusive link for spill and ready lists
  std::atomic<char*> stack{nullptr};     // lowest usable byte of its stack; null until first run
  const ClosureOps* ops = nullptr;
  std::uint64_t id = 0;
  std::atomic<FiberState> state{FiberState::kCreated};
  std::uint8_t unwind_requests = 0;  // times shutdown resumed it to throw FiberUnwind
  bool is_main = false;              // run()'s main fiber: its end starts shutdown
  bool unwound = false;              // it ended by FiberUnwind rather than by returning
  std::uint8_t stack_class = 0;      // StackPool size class; set before it first runs
  std::atomic<WaitReason> wait_reason{WaitReason::kNone};
  std::uint8_t track = 0;  // kTrack* (sched/tracking.hpp): a sampled park or yield in progress
  // 1 while the hibernator holds (or is taking) this parked fiber's stack; switch_to restores
  // it before the jump. Written under the hibernator's lock only (services/hibernator.hpp).
  std::atomic<std::uint8_t> hibernation{0};
  std::atomic<std::uint32_t> refs{1};
  // 1 while the kernel may write into this fiber's stack outside a system call (a recv queued on
  // io_uring into a buffer in its frame): the hibernator leaves it alone. Written by the fiber
  // itself (KernelWritesStack), read by the hibernator. In the padding before join_word.
  std::atomic<std::uint8_t> kernel_writes_stack{0};
  std::uint8_t reg_shard = 0;  // its registry shard, set once by Registry::add; in the padding too
  std::atomic<std::uintptr_t> join_word{0};  // 0 running, 1 done, else a joiner's WaitNode*
  Fiber* reg_prev = nullptr;
  Fiber* reg_next = nullptr;
  std::string* name = nullptr;    // allocated by set_name only
  FiberLocals* locals = nullptr;  // FiberLocal values (sched/fiber_locals.cpp); only the fiber
                                  // itself touches them, and it frees them before it ends
  CancelSignal stop;              // fired by Task::request_stop; its bounded waits attach to it
  std::atomic<std::int64_t> wait_arg{-1};
  std::atomic<std::int64_t> parked_at_ns{0};  // coarse clock; exact on a sampled park (and
                                              // when it was woken, while `track` says so)
  // Per-fiber copies of thread state that the compiler and libstdc++ keep per kernel thread.
  void* eh_caught = nullptr;     // __cxa_eh_globals::caughtExceptions
  unsigned int eh_uncaught = 0;  // __cxa_eh_globals::uncaughtExceptions
  int saved_errno = 0;
#if defined(__SANITIZE_ADDRESS__)
  void* asan_fake_stack = nullptr;
#endif
#if defined(__SANITIZE_THREAD__)
  void* tsan_fiber = nullptr;
#endif

  void* storage() noexcept { return reinterpret_cast<char*>(this) + storage_offset; }
  std::uint32_t storage_offset = 0;  // closure storage starts here, aligned for the closure
  std::uint32_t alloc_align = 0;     // operator new's alignment; 0: from FiberAlloc
};
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// FiberAlloc's 224-byte chunks leave 56 bytes for the closure after these 168 (fiber_alloc.hpp).
static_assert(sizeof(Fiber) == 168,
              "Fiber grew: check FiberAlloc::kChunk and docs/architecture.md");
#endif

// Every change of Fiber::state goes through one of these two functions (marl's
// changeFiberState), so debug builds check each transition against the diagram above.
//
// fiber_set_state: the caller owns the fiber at this moment (it runs it, is switching it in or
// out, or has just made it or won it with fiber_claim_parked). Legal: Created->Runnable (start),
// Runnable->Running (switch in), Running->Runnable (yield), Running->Parked (park), Running->Done
// (finish), Runnable->Done (shutdown drops a fiber that never ran).
inline bool fiber_transition_is_legal(FiberState from, FiberState to) noexcept {
  switch (to) {
    case FiberState::kRunnable:
      return from == FiberState::kCreated || from == FiberState::kRunning;
    case FiberState::kRunning:
      return from == FiberState::kRunnable;
    case FiberState::kParked:
      return from == FiberState::kRunning;
    case FiberState::kDone:
      return from == FiberState::kRunning || from == FiberState::kRunnable;
    case FiberState::kCreated:
      return false;
  }
  return false;
}
inline void fiber_set_state(Fiber* f, FiberState to,
                            std::memory_order order = std::memory_order_relaxed) noexcept {
  WEFT_ASSERT(fiber_transition_is_legal(f->state.load(std::memory_order_relaxed), to),
              "illegal fiber state transition");
  f->state.store(to, order);
}
// fiber_claim_parked: Parked->Runnable for a party that may race another for a parked fiber:
// the shutdown unwind, and a wake that can run while it does (Runtime::ready says which). Exactly
// one caller gets true and then owns the fiber; the others must leave it alone.
inline bool fiber_claim_parked(Fiber* f) noexcept {
  FiberState expected = FiberState::kParked;
  return f->state.compare_exchange_strong(expected, FiberState::kRunnable,
                                          std::memory_order_acq_rel);
}
// fiber_take_parked: Parked->Runnable by the one party that can claim this park (Runtime::ready
// says when that holds): a plain store, as the locked compare-exchange cost a one-worker ping-pong
// round trip 9% of its time. Debug builds check the fiber was parked.
inline void fiber_take_parked(Fiber* f) noexcept {
  WEFT_ASSERT(f->state.load(std::memory_order_relaxed) == FiberState::kParked,
              "a wake claimed a fiber that is not parked: two parties woke one park");
  f->state.store(FiberState::kRunnable, std::memory_order_release);
}

}  // namespace weft::detail
