// Monitor: one background thread per runtime (Go's sysmon) that
//  - keeps the coarse clock used for dump timestamps,
//  - wakes an idle worker, each tick, for a worker that one fiber has held since the last tick
//    while fibers are queued behind it: a thief takes those in its ring and deque, and its
//    runnext once it has seen that worker held for kLoneStealDelayNs (Runtime::steal). A worker
//    waking helpers for its own queues may miss one (scheduler.hpp, "Why no wake-up is lost", 3),
//    and a fiber woken into runnext wakes no helper at all, so this wake is what moves that work
//    within a tick or two,
//  - marks a worker stuck when one fiber has held it longer than Options::watchdog_threshold
//    (kStuckAfterNs when the watchdog is off), which lets thieves take the ring's lone fiber and
//    the runnext at once, and, with the watchdog on, reports the fiber once,
//  - detects deadlock as Go does: every worker idle, nothing queued, no timer, no blocking() job,
//    nothing parked on the poller, no outside thread that could still wake a fiber, for three
//    consecutive checks with no switch between them; then prints the dump and aborts,
//  - trims the shared stack pool so RSS follows the live fibers, and returns the C allocator's
//    free pages after a burst (HeapReturn),
//  - drops the fiber references the hibernator may not drop on its own thread,
//  - prints a fiber dump on SIGQUIT (installed over the default action or an inherited "ignore",
//    never over the program's own handler; the old disposition comes back when run() ends).
// It never runs fibers and never takes from run queues; it reads per-worker counters (relaxed)
// and whether a worker's queues are empty (Runtime::has_queued).
#pragma once

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "services/heap_return.hpp"
#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {

class Runtime;

class Monitor {
 public:
  explicit Monitor(Runtime& rt);
  ~Monitor();
  std::uint64_t reports() const noexcept { return reports_.load(std::memory_order_relaxed); }

 private:
  void loop();
  // The stuck-worker check above; reports only when `report`.
  void check_watchdog(std::int64_t now, std::int64_t threshold, bool report);
  bool check_deadlock();
  static bool outside_threads_may_wake();

  Runtime& rt_;
  ThreadMutex mu_;
  std::condition_variable_any cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<std::uint64_t> reports_{0};
  std::uint64_t quiet_switches_ = ~0ull;
  int quiet_checks_ = 0;
  bool sigquit_installed_ = false;
  struct sigaction sigquit_old_ {};  // restored by the destructor when we installed ours
  HeapReturn heap_return_;           // the monitor thread's alone
  std::thread thread_;
};

}  // namespace weft::detail
