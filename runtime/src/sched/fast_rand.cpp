// fast_rand (weft/detail/fast_rand.hpp): the worker's own xorshift64 generator, or a plain
// thread's. Out of line because it reads the calling thread's worker, which only the scheduler
// sees (select.cpp in weft::channels calls it).
#include "weft/detail/fast_rand.hpp"

#include <cstdint>

#include "sched/scheduler.hpp"

namespace weft::detail {

std::uint32_t fast_rand(std::uint32_t bound) noexcept {
  Worker* w = current_worker();
  std::uint64_t r;
  if (w) {
    r = xorshift64(w->rng);
  } else {
    // A plain thread's own generator; read only within this call, never across a switch.
    static thread_local std::uint64_t state = 0;
    if (state == 0) state = reinterpret_cast<std::uintptr_t>(&state) * 0x9E3779B97F4A7C15ull | 1;
    r = xorshift64(state);
  }
  return static_cast<std::uint32_t>(((r >> 32) * bound) >> 32);
}

}  // namespace weft::detail
