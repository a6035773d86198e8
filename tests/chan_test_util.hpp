// Helpers shared by the channel suites (chan_api_test, chan_go_test, chan_close_test,
// select_semantics_test, select_fairness_test, select_stress_test, chan_time_test,
// chan_model_test, chan_death_test): value types that count their instances (and a zero-size
// one), a scope guard that counts unwound frames, and bounded "has it returned yet?" checks for
// operations that must (or must not) block.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <weft/weft.hpp>

#include "test_util.hpp"

namespace weft_test {

// A move-only value that counts live objects (moved-from ones included) and notices a second
// destruction of the same object (its magic word is already "dead"). `id` is -1 once moved from.
struct Tracked {
  static inline std::atomic<std::int64_t> live{0};
  static inline std::atomic<std::int64_t> double_destroyed{0};
  static constexpr std::uint32_t kAlive = 0xA11CEu;
  static constexpr std::uint32_t kDead = 0xDEADu;

  std::int64_t id = -1;
  std::uint32_t magic = kAlive;

  explicit Tracked(std::int64_t i) noexcept : id(i) { live.fetch_add(1); }
  Tracked(Tracked&& o) noexcept : id(std::exchange(o.id, -1)) { live.fetch_add(1); }
  Tracked& operator=(Tracked&& o) noexcept {
    id = std::exchange(o.id, -1);
    return *this;
  }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  ~Tracked() {
    if (magic != kAlive) double_destroyed.fetch_add(1);
    magic = kDead;
    live.fetch_sub(1);
  }
  static void reset() {
    live = 0;
    double_destroyed = 0;
  }
};

// A zero-size value type.
struct Empty {};

// SCOPED_TRACE for fibers (gtest's trace stack is per thread, and a fiber may resume on another
// worker): if the scope added a failure, says in which context, e.g. "cap 3".
struct FailureContext {
  std::string what;
  bool failed_before = ::testing::Test::HasFailure();
  explicit FailureContext(std::string w) : what(std::move(w)) {}
  ~FailureContext() {
    if (!failed_before && ::testing::Test::HasFailure()) {
      std::fprintf(stderr, "  ^ the failures above happened with %s\n", what.c_str());
    }
  }
};

// A scope guard whose destructor counts: "this fiber's frame was unwound (or left)".
struct Unwound {
  std::atomic<int>* counter;
  ~Unwound() { counter->fetch_add(1); }
};

// Runs each body in its own fiber (call from a fiber) and tells which have returned, normally or
// by ChannelClosed. Bodies still blocked when main returns are unwound by run()'s shutdown; the
// shared state outlives run(), so `unwound()` can be checked after it.
class Bodies {
 public:
  struct State {
    explicit State(std::size_t n) : done(n) {}
    std::vector<std::atomic<bool>> done;
    std::atomic<int> started{0};
    std::atomic<int> unwound{0};  // frames left, by return or by unwinding
  };

  explicit Bodies(std::vector<std::function<void()>> bodies)
      : state_(std::make_shared<State>(bodies.size())) {
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      weft::go([st = state_, i, body = std::move(bodies[i])] {
        Unwound u{&st->unwound};
        st->started.fetch_add(1);
        try {
          body();
        } catch (const weft::ChannelClosed&) {
        }
        st->done[i] = true;
      });
    }
    eventually([&] { return state_->started.load() == static_cast<int>(size()); });
  }
  std::size_t size() const { return state_->done.size(); }
  bool returned(std::size_t i) const { return state_->done[i].load(); }
  bool all_returned_within(std::chrono::milliseconds timeout) const {
    return eventually(
        [&] {
          for (auto& d : state_->done) {
            if (!d.load()) return false;
          }
          return true;
        },
        timeout);
  }
  std::shared_ptr<State> state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace weft_test
