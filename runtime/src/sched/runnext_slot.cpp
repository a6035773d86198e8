// RunnextSlot's thief side and the process's membarrier registration; design in
// runnext_slot.hpp.
#include "sched/runnext_slot.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "weft/detail/spin_wait.hpp"

namespace weft::detail {
namespace {

long membarrier(int cmd) noexcept { return syscall(SYS_membarrier, cmd, 0, 0); }

}  // namespace

bool RunnextSlot::enable_asymmetric() noexcept {
  // Once per process; the registration lasts as long as the process.
  static const bool ok = [] {
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  asymmetric_.store(ok, std::memory_order_relaxed);
  return ok;
}

Fiber* RunnextSlot::take() noexcept {
  if (!asymmetric_.load(std::memory_order_relaxed)) {
    return slot_.exchange(nullptr, std::memory_order_acq_rel);
  }
  guards_.fetch_add(1, std::memory_order_seq_cst);
  // Registered at start; it fails only if something took the call away since (a seccomp filter).
  // Without it an exchange could race a plain owner access and hand a fiber out twice, so take
  // nothing: the fiber waits for its own worker.
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    guards_.fetch_sub(1, std::memory_order_release);
    return nullptr;
  }
  // The owner is inside a plain access, a few instructions long, unless it was preempted there.
  spin_wait_while([&] { return busy_.load(std::memory_order_acquire) != 0; });
  Fiber* f = slot_.exchange(nullptr, std::memory_order_acq_rel);
  guards_.fetch_sub(1, std::memory_order_release);
  return f;
}

}  // namespace weft::detail
