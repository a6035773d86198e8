// blocking() pool; design in blocking_pool.hpp.
#include "sched/blocking_pool.hpp"

#include <pthread.h>

#include <chrono>

#include "core/own_threads.hpp"
#include "sched/scheduler.hpp"
#include "weft/detail/wait_bounds.hpp"

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
        completed_.fetch_add(1, std::memory_order_relaxed);
        if (job->finish) {
          job->finish(job);
        } else {
          const Waker waker = job->waker;  // the job record dies once its fiber resumes
          waker.wake();
        }
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

namespace {

// A bounded blocking() job: on the heap, because its caller may stop waiting before it ran.
// `state` decides who owns it once the job is done: kRunning -> kDone (pool thread: the caller
// is still waiting; it is woken and owns the record) or kRunning -> kAbandoned (a bound fired:
// the caller left; the pool thread frees the record after the job).
struct BoundedJob : BlockingPool::Job {
  static constexpr int kRunning = 0, kDone = 1, kAbandoned = 2;
  std::atomic<int> state{kRunning};
  void (*destroy)(void*) noexcept = nullptr;

  static void finish_job(BlockingPool::Job* j) {
    auto* b = static_cast<BoundedJob*>(j);
    const Waker waker = b->waker;
    int expected = kRunning;
    if (b->state.compare_exchange_strong(expected, kDone, std::memory_order_acq_rel)) {
      waker.wake();  // the caller owns the record from here
      return;
    }
    b->destroy(b->arg);
    delete b;
  }
};

}  // namespace

bool run_blocking_bounded(void (*job)(void*), void (*destroy)(void*) noexcept, void* arg,
                          const CancelToken& bound, absl::Status* why) {
  Runtime& rt = runtime_or_throw("weft::blocking");
  auto* b = new BoundedJob;
  b->fn = job;
  b->arg = arg;
  b->waker = Waker::current();
  b->finish = &BoundedJob::finish_job;
  b->destroy = destroy;
  // The caller's half, in its frame: it outlives the bounds (disarmed before return). The gate
  // tells a bound that fires before the park's commit (nothing submitted yet) from one that fires
  // while the job runs.
  struct Caller {
    BoundedJob* job;
    BlockingPool* pool;
    ParkGate gate;
    bool abandoned = false;  // written by the withdraw before its wake
  } caller{b, &rt.blocking(), {}};
  WaitBounds bounds(
      bound,
      [](void* a) {
        auto* c = static_cast<Caller*>(a);
        if (!c->gate.fire_wakes()) return;  // not parked: the commit will not submit the job
        int expected = BoundedJob::kRunning;
        // Read before the CAS: once it succeeded the pool thread may free the record.
        const Waker waker = c->job->waker;
        if (c->job->state.compare_exchange_strong(expected, BoundedJob::kAbandoned,
                                                  std::memory_order_acq_rel)) {
          c->abandoned = true;
          waker.wake();
        }  // else the job is done and its finish wakes the caller
      },
      &caller);
  struct Disarm {
    WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  bool submitted = false;
  if (bounds.arm()) {
    struct Commit {
      Caller* c;
      bool* submitted;
      static bool run(void* a) {
        auto* self = static_cast<Commit*>(a);
        BlockingPool* const pool = self->c->pool;
        BoundedJob* const job = self->c->job;
        // Before the gate: once it says "parked", a bound may wake the caller, which reads it.
        *self->submitted = true;
        if (!self->c->gate.parked()) {  // a bound fired first: do not start the job
          *self->submitted = false;     // (nobody wakes the caller: it continues after us)
          return false;
        }
        // The caller may be awake, its frame gone, from here on: only the job and the pool.
        pool->submit(job);
        return true;
      }
    } commit{&caller, &submitted};
    // As in run_blocking, shutdown waits for the job instead of unwinding the caller, so park()
    // throws FiberUnwind only at entry, before the commit submitted anything.
    try {
      park(&Commit::run, &commit, WaitReason::kBlocking);
    } catch (...) {
      delete b;
      destroy(arg);
      throw;
    }
  }
  bounds.disarm();
  if (!submitted) {  // a bound had fired before the job could start
    delete b;
    destroy(arg);
    *why = bounds.status("weft::blocking");
    return false;
  }
  if (caller.abandoned) {
    *why = bounds.status("weft::blocking");
    return false;
  }
  delete b;
  return true;
}

}  // namespace weft::detail
