// Timer channels (after(), Ticker): a channel of capacity 1 that owns a runtime TimerEntry. The
// timer callback sends steady_clock::now() without blocking (a tick nobody took is dropped, as in
// Go) and, for a ticker, re-arms itself one period later (skipping missed ticks instead of
// bursting).
//
// Lifetime: the TimerChannel is owned by its channel. The last chan_release() stops the timer
// (timer_cancel waits for a running callback), so the callback never sees a freed channel and
// holds no reference of its own. stop: `stopped` is set first, then the timer is cancelled
// twice: the first cancel may wait for a callback that re-armed before it saw `stopped`; the
// second removes that re-armed timer; any later callback sees `stopped`.
// weft::Timer's stop/reset also take `control`, so that concurrent stop/reset calls on one timer
// (legal in Go) do not interleave their cancel / drain / re-arm steps; the callback never takes
// it, so a cancel waiting for a callback cannot deadlock on it.
#pragma once

#include <atomic>
#include <cstdint>

#include "chan_core.hpp"

namespace weft::detail {

struct TimerChannel {
  TimerEntry timer;  // first member: the callback recovers the TimerChannel from the TimerEntry*
  ChanCore* chan = nullptr;
  std::int64_t period_ns = 0;
  std::atomic<bool> stopped{false};
  // Set by a callback that was already due when `stopped` was set and so sent nothing; read
  // and cleared when the stop that set `stopped` has waited the callback out, so that
  // weft::Timer's stop/reset report the value they prevented.
  std::atomic<bool> suppressed{false};
  SpinLock control;  // weft::Timer stop/reset
};

// chan_release's last step for timer channels: stop and free the timer.
void destroy_timer(ChanCore* c) noexcept;

}  // namespace weft::detail
