// The runtime's one cheap random number generator (xorshift64; not for anything that needs
// unpredictability): steal-victim order and select's poll order use it.
#pragma once

#include <cstdint>

namespace weft::detail {

// Advances a xorshift64 state (never 0) and returns the new value.
inline std::uint64_t xorshift64(std::uint64_t& state) noexcept {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// Uniform-enough in [0, bound), bound > 0. From a worker it advances that worker's generator
// (owned by the worker's thread, so no sharing and no thread_local cached across a migration);
// from a plain thread, a generator of that thread's own.
std::uint32_t fast_rand(std::uint32_t bound) noexcept;

}  // namespace weft::detail
