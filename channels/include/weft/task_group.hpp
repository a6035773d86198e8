// weft::TaskGroup: Go's errgroup (with SetLimit). Runs functions that return absl::Status in
// fibers of their own; wait() returns the first error. The group's context() is cancelled as soon
// as one task fails (so its siblings can stop early) and when wait() returns.
//
//   weft::TaskGroup g(ctx, /*limit=*/8);       // at most 8 tasks at once
//   for (auto& url : urls) g.spawn([&, url] { return fetch(g.context(), url); });
//   absl::Status s = g.wait();                 // OK, or the first task's error
//
// A task that throws a std::exception counts as failing with kUnknown and its what(); the
// exception does not escape. spawn() parks the caller (a fiber) while `limit` tasks run.
// wait() may be called once or more, from a fiber (or a plain thread, which blocks); the
// destructor waits too, because the tasks refer to the group.
#pragma once

#include <absl/status/status.h>

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/context.hpp"
#include "weft/detail/spin_lock.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace weft {

class TaskGroup {
 public:
  explicit TaskGroup(const Context& parent = Context(), std::size_t limit = 0) : limit_(limit) {
    auto [ctx, cancel] = with_cancel(parent);
    ctx_ = std::move(ctx);
    cancel_ = std::move(cancel);
    if (limit_ > 0) slots_.emplace(static_cast<std::int64_t>(limit_));
  }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  ~TaskGroup() { wg_.wait(); }

  template <class F>
  void spawn(F&& f) {
    static_assert(std::is_convertible_v<std::invoke_result_t<std::decay_t<F>&>, absl::Status>,
                  "weft::TaskGroup::spawn: the function must return absl::Status");
    if (slots_) slots_->acquire();
    wg_.add(1);
    try {
      weft::go([this, fn = std::forward<F>(f)]() mutable {
        // Last touches of the group, in this order: a waiter of wg_ may destroy it at once.
        struct Finish {
          TaskGroup* g;
          ~Finish() {
            if (g->slots_) g->slots_->release();
            g->wg_.done();
          }
        } finish{this};
        absl::Status s;
        try {
          s = fn();
        } catch (const std::exception& e) {
          s = absl::UnknownError(std::string("task threw: ") + e.what());
        }
        if (!s.ok()) fail(std::move(s));
      });
    } catch (...) {
      wg_.done();
      if (slots_) slots_->release();
      throw;
    }
  }

  // Waits for every task spawned so far; returns the first error (OK if none), and cancels
  // context().
  absl::Status wait() {
    wg_.wait();
    cancel_();
    std::lock_guard lock(mu_);
    return first_error_;
  }

  const Context& context() const noexcept { return ctx_; }

 private:
  void fail(absl::Status s) {
    {
      std::lock_guard lock(mu_);
      if (first_error_.ok()) first_error_ = std::move(s);
    }
    cancel_();
  }

  std::size_t limit_;
  Context ctx_;
  CancelFunc cancel_;
  std::optional<Semaphore> slots_;  // limit_ > 0: one permit per running task
  WaitGroup wg_;
  detail::SpinLock mu_;  // a few instructions held; usable from plain threads too
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft
