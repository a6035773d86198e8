// Fake Fiber pointers for the queue tests: RunQueue and SpawnDeque only store and load Fiber*
// values, never dereference them, so distinct addresses of 64-byte cells stand in for fibers,
// and a pointer maps back to its item number.
#pragma once

#include <array>
#include <cstddef>
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

}  // namespace weft_internal_test
