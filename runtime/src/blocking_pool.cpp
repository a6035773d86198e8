// blocking() pool; design in blocking_pool.hpp.
#include "blocking_pool.hpp"

#include "own_threads.hpp"

#include <pthread.h>

#include <chrono>

namespace weft::detail {
namespace {
constexpr auto kIdleExit = std::chrono::seconds(10);
}

BlockingPool::~BlockingPool() {
  std::unique_lock lock(mu_);
  stop_ = true;
  cv_.notify_all();
  exited_cv_.wait(lock, [&] { return alive_ == 0; });
}

void BlockingPool::submit(Job* job) {
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard lock(mu_);
  queue_.push_back(job);
  if (idle_ > 0) {
    cv_.notify_one();
  } else if (alive_ < max_threads_) {
    ++alive_;
    threads_alive_.fetch_add(1, std::memory_order_relaxed);
    std::thread([this] { thread_main(); }).detach();
  }
}

void BlockingPool::thread_main() {
  pthread_setname_np(pthread_self(), "weft-blocking");
  {
    OwnThread own;  // unregistered before the pool may see this thread as gone
    std::unique_lock lock(mu_);
    for (;;) {
      if (!queue_.empty()) {
        Job* job = queue_.front();
        queue_.pop_front();
        lock.unlock();
        job->fn(job->arg);
        const Waker waker = job->waker;  // the job record dies once its fiber resumes
        completed_.fetch_add(1, std::memory_order_relaxed);
        waker.wake();
        inflight_.fetch_sub(1, std::memory_order_acq_rel);
        lock.lock();
        continue;
      }
      if (stop_) break;
      ++idle_;
      const bool woke = cv_.wait_for(lock, kIdleExit, [&] { return stop_ || !queue_.empty(); });
      --idle_;
      if (!woke) break;  // idle too long: leave
    }
  }
  std::lock_guard lock(mu_);
  --alive_;
  threads_alive_.fetch_sub(1, std::memory_order_relaxed);
  exited_cv_.notify_all();
}

}  // namespace weft::detail
