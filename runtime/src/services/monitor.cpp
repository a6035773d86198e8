// Monitor thread; design in monitor.hpp.
#include "services/monitor.hpp"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "core/own_threads.hpp"
#include "core/registry.hpp"
#include "core/thread_parker.hpp"
#include "sched/scheduler.hpp"
#include "services/hibernator.hpp"

namespace weft::detail {
namespace {
constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kTrimEvery = 100 * kMs;
// With the watchdog off, a worker held this long by one fiber is still marked stuck and helped.
constexpr std::int64_t kStuckAfterNs = 50 * kMs;

// SIGQUIT (Ctrl-\), as in Go, asks for a fiber dump; unlike Go the process keeps running, since
// a server under investigation should not die of being looked at. The handler only sets a flag
// (async-signal-safe); the monitor prints the dump on its next tick.
std::atomic<bool> g_dump_requested{false};
void on_sigquit(int) { g_dump_requested.store(true, std::memory_order_relaxed); }
}  // namespace

Monitor::Monitor(Runtime& rt)
    : rt_(rt),
      heap_return_(
          std::chrono::duration_cast<std::chrono::nanoseconds>(rt.options().heap_return_interval)
              .count()) {
  // Installed over the default action and over an inherited "ignore" (a server started in the
  // background by a shell, `prog &`, starts with SIGQUIT ignored: Go installs its handler then
  // too); a handler the program installed itself is left alone.
  if (sigaction(SIGQUIT, nullptr, &sigquit_old_) == 0 && !(sigquit_old_.sa_flags & SA_SIGINFO) &&
      (sigquit_old_.sa_handler == SIG_DFL || sigquit_old_.sa_handler == SIG_IGN)) {
    struct sigaction sa {};
    sa.sa_handler = &on_sigquit;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigquit_installed_ = sigaction(SIGQUIT, &sa, nullptr) == 0;
  }
  if (rt.options().heap_return_interval.count() > 0) HeapReturn::tune_allocator();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "weft-monitor");
    OwnThread own;
    loop();
  });
}

Monitor::~Monitor() {
  {
    ThreadMutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (sigquit_installed_) sigaction(SIGQUIT, &sigquit_old_, nullptr);  // as it was before run()
}

void Monitor::loop() {
  const std::int64_t watchdog = rt_.options().watchdog_threshold.count() * kMs;
  const std::int64_t threshold = watchdog > 0 ? watchdog : kStuckAfterNs;
  std::int64_t tick = 10 * kMs;
  if (threshold / 5 < tick) tick = std::max<std::int64_t>(threshold / 5, kMs);
  std::int64_t last_trim = 0;
  ThreadMutexLock lock(mu_);
  while (!stop_) {
    cv_.wait_for(mu_, std::chrono::nanoseconds(tick));
    if (stop_) break;
    mu_.unlock();
    const std::int64_t now = now_ns();
    rt_.set_coarse_now(now);
    check_watchdog(now, threshold, /*report=*/watchdog > 0);
    if (g_dump_requested.exchange(false, std::memory_order_relaxed)) {
      std::fprintf(stderr, "weft: SIGQUIT: fiber dump\n");
      std::fflush(stderr);
      rt_.registry().dump(std::cerr, rt_.stacks().class_sizes(), now);
      std::cerr.flush();
    }
    if (rt_.options().detect_deadlock && check_deadlock()) {
      std::fprintf(stderr, "weft: all fibers are asleep - deadlock!\n\n");
      std::fflush(stderr);
      rt_.registry().dump(std::cerr, rt_.stacks().class_sizes(), now);
      std::cerr.flush();
      std::abort();
    }
    if (Hibernator* h = rt_.hibernator()) h->free_deferred();
    if (now - last_trim >= kTrimEvery) {
      rt_.stacks().trim();
      heap_return_.tick(now, rt_.fibers_alive());
      last_trim = now;
    }
    mu_.lock();
  }
}

void Monitor::check_watchdog(std::int64_t now, std::int64_t threshold, bool report) {
  for (unsigned i = 0; i < rt_.nworkers(); ++i) {
    Worker& w = rt_.worker(i);
    const std::uint64_t seq = w.switches.load(std::memory_order_relaxed);
    const std::uint64_t id = w.running_id.load(std::memory_order_relaxed);
    if (id == 0 || seq != w.mon_seen_seq) {
      w.mon_seen_seq = seq;
      w.mon_stuck_since = now;
      if (w.stuck.load(std::memory_order_relaxed)) w.stuck.store(false, std::memory_order_relaxed);
      continue;
    }
    // One fiber has held the worker since the last tick at least.
    if (now - w.mon_stuck_since >= threshold && w.mon_reported_seq != seq) {
      w.mon_reported_seq = seq;
      w.stuck.store(true, std::memory_order_relaxed);
      if (report) {
        reports_.fetch_add(1, std::memory_order_relaxed);
        // The fiber may finish and be freed at any moment: only its id (copied by the worker) is
        // safe to read.
        const std::string name = rt_.registry().name_by_id(id);
        std::fprintf(stderr,
                     "weft: watchdog: fiber %llu \"%s\" has held worker %u for %lld ms without "
                     "yielding (a CPU-bound loop or a blocking call?); other workers take over its "
                     "queue. Wrap blocking calls in weft::blocking() or yield in long loops.\n",
                     static_cast<unsigned long long>(id), name.c_str(), i,
                     static_cast<long long>((now - w.mon_stuck_since) / kMs));
      }
    }
    // Fibers queued behind it get an idle worker now, not at the stuck mark: a fiber woken into
    // its runnext woke no helper (a thief takes it once it has seen the worker held), and the
    // worker may have skipped the wake for work it queued for itself.
    if (Runtime::has_queued(w)) rt_.wake_idle_worker();
  }
}

bool Monitor::outside_threads_may_wake() {
  // Threads that are not weft's own could send on a channel or signal a WaitGroup at any time,
  // unless they are themselves blocked in a weft primitive.
  return count_foreign_threads() > foreign_threads_blocked();
}

bool Monitor::check_deadlock() {
  if (!rt_.quiescent()) {
    quiet_checks_ = 0;
    return false;
  }
  std::uint64_t switches = 0;
  for (unsigned i = 0; i < rt_.nworkers(); ++i) {
    switches += rt_.worker(i).switches.load(std::memory_order_relaxed);
  }
  if (switches != quiet_switches_) {
    quiet_switches_ = switches;
    quiet_checks_ = 1;
    return false;
  }
  if (++quiet_checks_ < 3) return false;
  if (outside_threads_may_wake()) {
    quiet_checks_ = 0;
    return false;
  }
  return rt_.quiescent() && rt_.fibers_alive() > 0;
}

}  // namespace weft::detail
