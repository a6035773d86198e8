// SpinLock slow path: spin with pause, then give the CPU away (the holder may be descheduled).
#include "weft/detail/spin_lock.hpp"

#include <sched.h>

namespace weft::detail {

void SpinLock::contended() noexcept {
  for (int i = 0; locked_.load(std::memory_order_relaxed); ++i) {
    if (i < 64) {
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
}

}  // namespace weft::detail
