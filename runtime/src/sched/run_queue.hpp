// RunQueue: a worker's bounded lock-free queue of runnable fibers (Go's P.runq).
//
// Single producer (the owning worker pushes at tail), multiple consumers (the owner pops at head,
// thieves steal half from head), all by CAS on `head_`. Slots hold plain pointers; a thief copies
// slots out before its CAS publishes that it took them, and the owner only overwrites slots that
// every consumer has moved past (tail - head < capacity), so a stale read is discarded by a
// failed CAS. FIFO order between the owner's pushes and pops. Slots are relaxed atomics so that
// the benign "read then maybe discard" is not a data race in the C++ model (or to TSan).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "core/fiber.hpp"

namespace weft::detail {

class RunQueue {
 public:
  static constexpr std::uint32_t kCapacity = 256;

  // Owner only. Returns false if full (the caller queues the fiber on its spill list instead).
  bool push(Fiber* f) noexcept {
    const std::uint32_t h = head_.load(std::memory_order_acquire);
    const std::uint32_t t = tail_.load(std::memory_order_relaxed);
    if (t - h >= kCapacity) return false;
    slots_[t % kCapacity].store(f, std::memory_order_relaxed);
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }

  // Owner only.
  Fiber* pop() noexcept {
    std::uint32_t h = head_.load(std::memory_order_acquire);
    for (;;) {
      const std::uint32_t t = tail_.load(std::memory_order_relaxed);
      if (h == t) return nullptr;
      Fiber* f = slots_[h % kCapacity].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) return f;
    }
  }

  // Owner only, and only while no other thread can steal (a runtime with one worker): the same
  // as pop() without the CAS.
  Fiber* pop_unshared() noexcept {
    const std::uint32_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_relaxed)) return nullptr;
    Fiber* f = slots_[h % kCapacity].load(std::memory_order_relaxed);
    head_.store(h + 1, std::memory_order_release);
    return f;
  }

  // Any thread. Moves the larger half of this queue (1 of 1, 2 of 3) into `dst` (which must be
  // empty and owned by the caller); returns one of the stolen fibers to run directly, or null.
  Fiber* steal_into(RunQueue& dst) noexcept {
    const std::uint32_t dt = dst.tail_.load(std::memory_order_relaxed);
    for (;;) {
      std::uint32_t h = head_.load(std::memory_order_acquire);
      const std::uint32_t t = tail_.load(std::memory_order_acquire);
      std::uint32_t n = t - h;
      n -= n / 2;
      if (n == 0 || n > kCapacity) return nullptr;  // empty, or an inconsistent read: retry later
      for (std::uint32_t i = 0; i < n; ++i) {
        dst.slots_[(dt + i) % kCapacity].store(
            slots_[(h + i) % kCapacity].load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
      if (head_.compare_exchange_weak(h, h + n, std::memory_order_acq_rel)) {
        Fiber* first = dst.slots_[(dt + n - 1) % kCapacity].load(std::memory_order_relaxed);
        if (n > 1) dst.tail_.store(dt + n - 1, std::memory_order_release);
        return first;
      }
    }
  }

  std::uint32_t size() const noexcept {
    const std::uint32_t h = head_.load(std::memory_order_acquire);  // head first: tail >= head
    return tail_.load(std::memory_order_acquire) - h;
  }
  bool empty() const noexcept { return size() == 0; }
  // Any thread, racy: the position of the head. It only grows, so a fiber that sits at the head
  // keeps the same value until it is taken.
  std::uint32_t head_position() const noexcept { return head_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<std::uint32_t> head_{0};
  alignas(64) std::atomic<std::uint32_t> tail_{0};
  std::array<std::atomic<Fiber*>, kCapacity> slots_{};
};

}  // namespace weft::detail
