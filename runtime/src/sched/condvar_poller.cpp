// The default poller (design in condvar_poller.hpp). mu_ guards woken_.
#include "sched/condvar_poller.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace weft::detail {
namespace {

class CondvarPoller final : public Poller {
 public:
  void poll(std::int64_t timeout_ns, FiberList&) override {
    std::unique_lock lock(mu_);
    if (timeout_ns < 0) {
      cv_.wait(lock, [&] { return woken_; });
    } else if (timeout_ns > 0) {
      cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&] { return woken_; });
    }
    woken_ = false;
  }
  void wakeup() noexcept override {
    std::lock_guard lock(mu_);
    woken_ = true;
    cv_.notify_one();
  }
  std::size_t waiters() const noexcept override { return 0; }
  const char* name() const noexcept override { return "none"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

}  // namespace

std::unique_ptr<Poller> make_condvar_poller() { return std::make_unique<CondvarPoller>(); }

}  // namespace weft::detail
