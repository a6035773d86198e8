// Timers as channels, as in Go's time package. All three run on the runtime's timer heap, so they
// need a running runtime (they throw std::logic_error otherwise); the channels they return can be
// received from anywhere, fibers and plain threads alike.
#pragma once

#include <chrono>

#include "weft/chan.hpp"

namespace weft {

using TimePoint = std::chrono::steady_clock::time_point;

// A channel that receives the time once, `d` from now (Go's time.After). Its timer is released
// when the last handle of the channel goes away, fired or not.
Chan<TimePoint> after(std::chrono::nanoseconds d);

// Sends the time once on chan(), `d` from now (Go's time.NewTimer). stop() and reset() follow
// Go 1.23: once either has returned, no value from before the call is received (a value sent but
// not yet received is discarded). Both are safe to call concurrently with each other and with
// receivers. The destructor stops the timer; a copy of chan() may outlive the Timer.
class Timer {
 public:
  explicit Timer(std::chrono::nanoseconds d);
  Timer(Timer&&) noexcept = default;
  Timer& operator=(Timer&& o) noexcept;
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  ~Timer() { stop(); }

  Chan<TimePoint> chan() const { return ch_; }
  // True if this prevented a delivery: the timer had not fired, or its value was not received.
  // False if it had already been received, or the timer was already stopped.
  bool stop() noexcept;
  // Re-arms the timer for `d` from now; returns what stop() would have. Huge durations
  // saturate ("never"). Throws std::logic_error outside a running runtime or on a moved-from
  // Timer.
  bool reset(std::chrono::nanoseconds d);

 private:
  Chan<TimePoint> ch_;
};

// Sends the time every `period` on chan() (Go's time.Ticker). A tick nobody has taken yet is
// dropped, and a late ticker skips ticks instead of bursting. stop() (also the destructor)
// releases the timer; after it no tick is sent. A non-positive period throws
// std::invalid_argument.
class Ticker {
 public:
  explicit Ticker(std::chrono::nanoseconds period);
  Ticker(Ticker&&) noexcept = default;
  Ticker& operator=(Ticker&& o) noexcept;
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;
  ~Ticker() { stop(); }

  Chan<TimePoint> chan() const { return ch_; }
  void stop() noexcept;

 private:
  Chan<TimePoint> ch_;
};

}  // namespace weft
