// after(), Timer and Ticker: thin typed wrappers over the timer channels of timer_chan.cpp.
#include "weft/time.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "weft/detail/deadline.hpp"
#include "weft/detail/park.hpp"

namespace weft {
namespace {
std::int64_t deadline_after(std::int64_t d) {
  return detail::deadline_after_ns(detail::now_ns(), d);
}
}  // namespace

Chan<TimePoint> after(std::chrono::nanoseconds d) {
  return detail::chan_adopt<TimePoint>(detail::chan_make_timer(deadline_after(d.count()), 0));
}

Timer::Timer(std::chrono::nanoseconds d)
    : ch_(detail::chan_adopt<TimePoint>(detail::chan_make_timer(deadline_after(d.count()), 0))) {}

Timer& Timer::operator=(Timer&& o) noexcept {
  if (this != &o) {
    stop();
    ch_ = std::move(o.ch_);
  }
  return *this;
}

bool Timer::stop() noexcept { return detail::chan_timer_stop(detail::core_of(ch_)); }

bool Timer::reset(std::chrono::nanoseconds d) {
  return detail::chan_timer_reset(detail::core_of(ch_), deadline_after(d.count()));
}

Ticker::Ticker(std::chrono::nanoseconds period) : ch_(nullptr) {
  if (period.count() <= 0) {
    throw std::invalid_argument("weft::Ticker: the period must be positive, got " +
                                std::to_string(period.count()) + " ns");
  }
  ch_ = detail::chan_adopt<TimePoint>(
      detail::chan_make_timer(deadline_after(period.count()), period.count()));
}

Ticker& Ticker::operator=(Ticker&& o) noexcept {
  if (this != &o) {
    stop();
    ch_ = std::move(o.ch_);
  }
  return *this;
}

void Ticker::stop() noexcept { detail::chan_stop_timer(detail::core_of(ch_)); }

}  // namespace weft
