// Fake Fiber pointers for the queue tests: RunQueue and SpawnDeque only store and load Fiber*
// values, never dereference them, so distinct addresses of 64-byte cells stand in for fibers,
// and a pointer maps back to its item number.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/fiber.hpp"

namespace weft_internal_test {

using weft::detail::Fiber;

class FakeFibers {
 public:
  explicit FakeFibers(std::size_t n) : cells_(n) {}
  Fiber* operator[](std::size_t i) { return reinterpret_cast<Fiber*>(cells_[i].data()); }
  // Item number of `f`, or size() if `f` is not one of ours.
  std::size_t index(const Fiber* f) const {
    const auto* p = reinterpret_cast<const Cell*>(f);
    if (cells_.empty() || p < cells_.data() || p >= cells_.data() + cells_.size()) return size();
    return static_cast<std::size_t>(p - cells_.data());
  }
  std::size_t size() const { return cells_.size(); }

 private:
  struct alignas(64) Cell : std::array<char, 64> {};
  std::vector<Cell> cells_;
};

// Counts, from any thread, how often each fake fiber came out of a queue, for the stress tests
// "every item exactly once". A pointer that is not one of ours counts as foreign.
class ExactlyOnce {
 public:
  explicit ExactlyOnce(FakeFibers& f)
      : f_(f), seen_(std::make_unique<std::atomic<std::uint8_t>[]>(f.size())) {
    for (std::size_t i = 0; i < f.size(); ++i) seen_[i].store(0, std::memory_order_relaxed);
  }
  void mark(Fiber* x) {
    const std::size_t i = f_.index(x);
    if (i >= f_.size()) {
      foreign_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    seen_[i].fetch_add(1, std::memory_order_relaxed);
  }
  std::size_t foreign() const { return foreign_.load(); }
  // Empty if every item was seen exactly once; else which item first was not, and how often.
  std::string failure() const {
    for (std::size_t i = 0; i < f_.size(); ++i) {
      const int n = seen_[i].load();
      if (n != 1) return "item " + std::to_string(i) + " seen " + std::to_string(n) + " times";
    }
    return {};
  }

 private:
  FakeFibers& f_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> seen_;
  std::atomic<std::size_t> foreign_{0};
};

}  // namespace weft_internal_test
