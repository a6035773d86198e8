// SpawnDeque: a worker's fibers that were spawned and have not started yet, as a Chase-Lev
// work-stealing deque. The owner pushes and takes at the bottom (newest first: fork-join trees
// such as skynet run depth-first, so only a few hundred fibers are alive at once instead of a
// whole tree level); thieves steal from the top (oldest: the biggest subtrees).
// Bounded; a full deque makes the spawner hand the fiber to the global queue and yield, which
// lets the workers catch up with a spawn storm instead of piling up closures.
// All index operations are seq_cst where the algorithm needs a fence (Lê et al., PPoPP 2013),
// which on x86 costs one xchg in take() and keeps the algorithm visible to TSan.
//
// Batch steals. A thief takes up to kMaxStealBatch of the oldest fibers (at most half of what it
// sees) with one CAS of top, as Go steals half a run queue: a worker helping a spawning loop then
// pays for the shared lines (top, its own spinning count) once per batch. Stealing one at a time,
// it would pay per fiber: spawn on all workers of a 2-vCPU host took about 225 ns that way against
// 160 ns. Batches of up to 64 rather than 16 took it from about 197 to 162 ns (with FiberAlloc's
// look-ahead). Classic Chase-Lev lets the owner take slot b
// without a CAS while b > t, because a thief only ever claims slot t. A batch thief claims
// [t, t+k), computed from a bottom it read earlier, and the owner may have taken from the bottom
// since, so a batch can reach the owner's slot. The owner therefore checks, between publishing its
// new bottom and reading top, whether a batch thief is between announcing itself and its CAS
// (batch_thieves_). If none is, every batch thief either announced itself after that check, so it
// reads the new bottom and its half stays below b, or finished its CAS before the check, so the
// owner's read of top sees it: the classic argument holds. (A bottom read after the owner's is this
// one or a later one; a later, larger one exists only after the owner pushed again at b, and that
// push publishes the new fiber in slot b to the thief.) If one is and b is within kMaxStealBatch of
// top, the owner restores bottom and takes the oldest fiber itself, by the thieves' CAS: there
// take() returns the oldest, not the newest. Far from top it needs no check: a batch that read the
// old bottom read top before the owner did, so its CAS succeeds only if it starts at the owner's t
// (it ends within kMaxStealBatch of that, below b) or had succeeded before the owner read top (it
// lies below the owner's t).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "core/fiber.hpp"

namespace weft::detail {

class SpawnDeque {
 public:
  static constexpr std::int64_t kCapacity = 256;
  static constexpr std::int64_t kMaxStealBatch = 64;
  static_assert(kMaxStealBatch <= kCapacity / 2, "a batch is at most half of a full deque");

  bool push(Fiber* f) noexcept {  // owner
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_acquire);
    if (b - t >= kCapacity) return false;
    slots_[static_cast<std::size_t>(b % kCapacity)].store(f, std::memory_order_relaxed);
    bottom_.store(b + 1, std::memory_order_release);
    return true;
  }

  Fiber* take() noexcept {  // owner
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    if (b < top_.load(std::memory_order_relaxed)) return nullptr;  // cheap empty check
    bottom_.store(b, std::memory_order_seq_cst);
    const bool batch_in_flight = batch_thieves_.load(std::memory_order_seq_cst) != 0;
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {
      bottom_.store(b + 1, std::memory_order_relaxed);
      return nullptr;
    }
    if (batch_in_flight && b - t < kMaxStealBatch) {
      // Release: thieves may read this bottom while slots [t, b] are full, and a later relaxed
      // store would not carry push()'s release (C++20 release sequences stop at it).
      bottom_.store(b + 1, std::memory_order_release);
      Fiber* f = nullptr;
      return claim_oldest(&f, 1) ? f : nullptr;
    }
    Fiber* f = slots_[static_cast<std::size_t>(b % kCapacity)].load(std::memory_order_relaxed);
    if (t == b) {  // the last one: race the thieves for it
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst)) f = nullptr;
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return f;
  }

  // Claims up to `max` (1..kMaxStealBatch) of the oldest fibers with one CAS, at most half of
  // what is queued but at least one, into out[]; returns how many. Any thread but the owner.
  std::size_t steal_batch(Fiber** out, std::size_t max) noexcept {
    // The owner's take() relies on it: a batch reaches at most kMaxStealBatch slots past top.
    WEFT_ASSERT(max <= static_cast<std::size_t>(kMaxStealBatch), "a steal batch past the limit");
    if (max <= 1) return claim_oldest(out, 1);
    batch_thieves_.fetch_add(1, std::memory_order_seq_cst);
    const std::size_t n = claim_oldest(out, max);
    batch_thieves_.fetch_sub(1, std::memory_order_seq_cst);
    return n;
  }

  bool empty() const noexcept {
    return bottom_.load(std::memory_order_seq_cst) <= top_.load(std::memory_order_seq_cst);
  }
  // Any thread, approximate (the metrics' queue length): 0..kCapacity.
  std::int64_t size() const noexcept {
    const std::int64_t t = top_.load(std::memory_order_relaxed);
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    return b <= t ? 0 : (b - t < kCapacity ? b - t : kCapacity);
  }

 private:
  // The oldest `max` at most (see steal_batch), by one CAS of top.
  std::size_t claim_oldest(Fiber** out, std::size_t max) noexcept {
    for (;;) {
      std::int64_t t = top_.load(std::memory_order_seq_cst);
      const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
      if (t >= b) return 0;
      const std::int64_t k =
          std::clamp<std::int64_t>((b - t) / 2, 1, static_cast<std::int64_t>(max));
      for (std::int64_t i = 0; i < k; ++i) {
        out[i] =
            slots_[static_cast<std::size_t>((t + i) % kCapacity)].load(std::memory_order_relaxed);
      }
      if (top_.compare_exchange_strong(t, t + k, std::memory_order_seq_cst)) {
        return static_cast<std::size_t>(k);
      }
    }
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  std::array<std::atomic<Fiber*>, kCapacity> slots_{};
  alignas(64) std::atomic<int> batch_thieves_{0};  // thieves inside steal_batch with max > 1
};

}  // namespace weft::detail
