// RunnextSlot: a worker's runnext (Go's P.runnext), the one fiber a wake on this worker made
// runnable and that runs next here, for warm caches. The owner exchanges it on every wake it makes
// and on every pick; another thread takes it only from a worker held by one fiber (Runtime::steal:
// no switch for kLoneStealDelayNs, or the monitor's stuck mark), and at shutdown once the workers
// were joined (Runtime::pop_any, with take_quiescent).
//
// Why not one atomic exchange everywhere: with several workers a ping-pong between two fibers on
// one worker paid two `xchg`s per hand-off here (each drains the store buffer), 89% of pick_next's
// samples, and ran at 200 ns per round trip against 165 ns on a one-worker runtime, where the
// owner already used a plain load and store. The owner's accesses are frequent and a thief's are
// rare, so the cost moves to the thief: an asymmetric Dekker handshake, with the thief issuing
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full memory barrier on every thread
// of the process (an IPI to the CPUs running them; a thread not running passed one when it was
// switched out).
//
//   owner:  busy_ = 1; [compiler fence]; if guards_ == 0: plain load + store of slot_, busy_ = 0
//           (release); else busy_ = 0 and an atomic exchange.
//   thief:  guards_ += 1; membarrier(); wait until busy_ == 0 (acquire); exchange slot_ with null;
//           guards_ -= 1.
//
// The membarrier puts a full barrier at some point P of the owner's instruction stream. If P
// falls before the owner's load of guards_, that load sees the thief's increment (made before the
// membarrier) and the owner exchanges atomically. If P falls after it, the owner's busy_ = 1 was
// made visible at P, so the thief reads 1 and waits for the owner's release of busy_, after which
// the owner's load and store of slot_ happen-before the thief's exchange. An owner access that
// starts after P sees guards_. And a thief that finished before the owner read guards_ 0 has
// released its guard after its exchange: the owner's acquire load of guards_ (which also keeps
// the compiler from sinking that load below the slot's) makes the exchange happen-before the
// owner's plain access. So a plain owner access never overlaps a thief's exchange.
//
// Where membarrier is unavailable (a kernel before 4.14, a seccomp filter, Valgrind), every access
// is an atomic exchange, as before. A one-worker runtime has no thieves: plain access, no flag.
#pragma once

#include <atomic>

#include "core/fiber.hpp"

namespace weft::detail {

class RunnextSlot {
 public:
  // Registers the process for private expedited membarrier, once; whether it is available.
  static bool enable_asymmetric() noexcept;

  // Owner: puts f (or null) in the slot and returns what it held. `alone`: no other worker
  // exists, so nobody else ever touches the slot.
  Fiber* owner_exchange(Fiber* f, bool alone) noexcept {
    if (alone) {
      Fiber* old = slot_.load(std::memory_order_relaxed);
      slot_.store(f, std::memory_order_release);
      return old;
    }
    if (!asymmetric_.load(std::memory_order_relaxed)) {
      return slot_.exchange(f, std::memory_order_acq_rel);
    }
    busy_.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the CPU's fence is the thief's IPI
    if (guards_.load(std::memory_order_acquire) != 0) {
      busy_.store(0, std::memory_order_relaxed);
      return slot_.exchange(f, std::memory_order_acq_rel);
    }
    Fiber* old = slot_.load(std::memory_order_acquire);
    slot_.store(f, std::memory_order_release);
    busy_.store(0, std::memory_order_release);
    return old;
  }

  // Any thread but the owner: empties the slot and returns what it held. A system call (the
  // membarrier) when the fast owner path is on: check peek() first. Null also if the membarrier
  // fails (a seccomp filter installed later): the fiber then waits for its own worker.
  Fiber* take() noexcept;

  // Empties the slot once no thread can touch it concurrently (shutdown, after the workers
  // were joined): an exchange, no membarrier.
  Fiber* take_quiescent() noexcept { return slot_.exchange(nullptr, std::memory_order_acq_rel); }

  // Any thread, racy (the idle protocol's emptiness checks, metrics).
  Fiber* peek(std::memory_order order = std::memory_order_relaxed) const noexcept {
    return slot_.load(order);
  }

 private:
  static inline std::atomic<bool> asymmetric_{false};  // membarrier registered for the process
  std::atomic<Fiber*> slot_{nullptr};
  std::atomic<int> busy_{0};    // owner: inside a plain access
  std::atomic<int> guards_{0};  // thieves between announcing themselves and their exchange
};

}  // namespace weft::detail
