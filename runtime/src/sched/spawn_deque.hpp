// SpawnDeque: a worker's fibers that were spawned and have not started yet, as a Chase-Lev
// work-stealing deque. The owner pushes and takes at the bottom (newest first: fork-join trees
// such as skynet run depth-first, so only a few hundred fibers are alive at once instead of a
// whole tree level); thieves steal from the top (oldest: the biggest subtrees).
// Bounded; a full deque makes the spawner hand the fiber to the global queue and yield, which
// lets the workers catch up with a spawn storm instead of piling up closures.
// All index operations are seq_cst where the algorithm needs a fence (Lê et al., PPoPP 2013),
// which on x86 costs one xchg in take() and keeps the algorithm visible to TSan.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "core/fiber.hpp"

namespace weft::detail {

class SpawnDeque {
 public:
  static constexpr std::int64_t kCapacity = 256;

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
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {
      bottom_.store(b + 1, std::memory_order_relaxed);
      return nullptr;
    }
    Fiber* f = slots_[static_cast<std::size_t>(b % kCapacity)].load(std::memory_order_relaxed);
    if (t == b) {  // the last one: race the thieves for it
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst)) f = nullptr;
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return f;
  }

  Fiber* steal() noexcept {  // any thread
    for (;;) {
      std::int64_t t = top_.load(std::memory_order_seq_cst);
      const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
      if (t >= b) return nullptr;
      Fiber* f = slots_[static_cast<std::size_t>(t % kCapacity)].load(std::memory_order_relaxed);
      if (top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst)) return f;
    }
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
  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  std::array<std::atomic<Fiber*>, kCapacity> slots_{};
};

}  // namespace weft::detail
