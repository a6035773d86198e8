// BlockingPool: kernel threads, kept apart from the workers, that run blocking() jobs. The
// submitting fiber parks; the pool thread runs the job, then wakes the fiber. Threads start on
// demand up to a bound and leave after sitting idle, so a quiet runtime holds none. A submit that
// finds no idle thread starts one (below the bound), so a job never waits behind another job that
// may block for long; a pool thread that takes a job while more are queued and no peer is idle
// starts the next one, so a burst of submits is not serialised behind one thread's wake-up.
// `inflight_` counts jobs from submission until their fiber was woken: deadlock detection and
// shutdown read it (a fiber waiting on a job can still be woken). A bounded blocking() whose
// bound fired lets its fiber go; the job runs on, and its `finish` frees it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/detail/park.hpp"
#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {

class BlockingPool {
 public:
  struct Job {
    void (*fn)(void*);
    void* arg;
    Waker waker;
    // Null: wake `waker` after fn. Else called instead (a bounded blocking() whose caller may
    // have stopped waiting: it wakes the caller or frees the abandoned job).
    void (*finish)(Job*) = nullptr;
  };

  explicit BlockingPool(unsigned max_threads) : max_threads_(max_threads ? max_threads : 1) {}
  ~BlockingPool();  // waits for running jobs, then stops every thread

  void submit(Job* job);
  std::uint64_t inflight() const noexcept { return inflight_.load(std::memory_order_acquire); }
  std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_relaxed); }
  std::uint64_t threads() const noexcept { return threads_alive_.load(std::memory_order_relaxed); }

 private:
  void thread_main();
  void start_thread_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const unsigned max_threads_;
  ThreadMutex mu_;
  std::condition_variable_any cv_;
  std::condition_variable_any exited_cv_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  unsigned idle_ ABSL_GUARDED_BY(mu_) = 0;
  unsigned alive_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<std::uint64_t> inflight_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> threads_alive_{0};
};

}  // namespace weft::detail
