// Timers as channels, as in Go's time package. Both run on the runtime's timer heap, so they need
// a running runtime (they throw std::logic_error otherwise); the channels they return can be
// received from anywhere, fibers and plain threads alike.
#pragma once

#include <chrono>

#include "weft/chan.hpp"

namespace weft {

using TimePoint = std::chrono::steady_clock::time_point;

// A channel that receives the time once, `d` from now (Go's time.After). Its timer is released
// when the last handle of the channel goes away, fired or not.
Chan<TimePoint> after(std::chrono::nanoseconds d);

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
