// blocking() pool; design in blocking_pool.hpp.
#include "sched/blocking_pool.hpp"

#include <pthread.h>

#include <chrono>

#include "core/own_threads.hpp"
#include "sched/scheduler.hpp"

namespace weft::detail {
namespace {
constexpr auto kIdleExit = std::chrono::seconds(10);
}

BlockingPool::~BlockingPool() {
  ThreadMutexLock lock(mu_);
  stop_ = true;
  cv_.notify_all();
  exited_cv_.wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return alive_ == 0; });
}

void BlockingPool::submit(Job* job) {
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  ThreadMutexLock lock(mu_);
  queue_.push_back(job);
  if (idle_ > 0) {
    cv_.notify_one();
  } else if (alive_ < max_threads_) {
    // Every thread is busy with a job that may block for long: this job must not wait for one of
    // them to finish (Go hands the P to a new M in the same case). Creating a thread costs tens
    // of microseconds on this worker, paid only when no pool thread is idle.
    start_thread_locked();
  }
}

void BlockingPool::start_thread_locked() {
  ++alive_;
  threads_alive_.fetch_add(1, std::memory_order_relaxed);
  std::thread([this] { thread_main(); }).detach();
}

void BlockingPool::thread_main() {
  pthread_setname_np(pthread_self(), "weft-blocking");
  {
    OwnThread own;  // unregistered before the pool may see this thread as gone
    ThreadMutexLock lock(mu_);
    for (;;) {
      if (!queue_.empty()) {
        Job* job = queue_.front();
        queue_.pop_front();
        // More jobs wait and nobody is free to take them: add a thread before running ours.
        if (!queue_.empty() && idle_ == 0 && alive_ < max_threads_) start_thread_locked();
        mu_.unlock();
        job->fn(job->arg);
        const Waker waker = job->waker;  // the job record dies once its fiber resumes
        completed_.fetch_add(1, std::memory_order_relaxed);
        waker.wake();
        inflight_.fetch_sub(1, std::memory_order_acq_rel);
        mu_.lock();
        continue;
      }
      if (stop_) break;
      ++idle_;
      const bool woke = cv_.wait_for(mu_, kIdleExit, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      });
      --idle_;
      if (!woke) break;  // idle too long: leave
    }
  }
  ThreadMutexLock lock(mu_);
  --alive_;
  threads_alive_.fetch_sub(1, std::memory_order_relaxed);
  exited_cv_.notify_all();
}

void run_blocking(void (*job)(void*), void* arg) {
  Runtime& rt = runtime_or_throw("weft::blocking");
  BlockingPool::Job j{job, arg, Waker::current()};
  struct Ctx {
    BlockingPool* pool;
    BlockingPool::Job* job;
  } ctx{&rt.blocking(), &j};
  // The job owns the fiber's frame until it wakes it, so shutdown waits for it instead of
  // unwinding (see Runtime::shutdown_unwind): park() can throw FiberUnwind only at entry, before
  // the commit submitted the job.
  park(
      [](void* a) {
        auto* c = static_cast<Ctx*>(a);
        c->pool->submit(c->job);
        return true;
      },
      &ctx, WaitReason::kBlocking);
}

}  // namespace weft::detail
