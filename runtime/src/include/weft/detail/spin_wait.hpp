// spin_wait_while: waits out another thread's short step -- a few instructions it is inside,
// which it never parks in (a select hook firing, an unlock_shared leaving, a runnext owner's
// plain access). 64 pauses, then sched_yield() between checks, so that a thread the kernel
// preempted inside its step gets a CPU to finish it.
#pragma once

#include <sched.h>

namespace weft::detail {

template <class StillBusy>
void spin_wait_while(StillBusy still_busy) noexcept {
  for (int spins = 0; still_busy(); ++spins) {
    if (spins < 64) {
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
}

}  // namespace weft::detail
