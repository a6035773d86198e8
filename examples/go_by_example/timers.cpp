// Go by Example: Timers -- https://gobyexample.com/timers
//
// weft has Go's time.After (weft::after) but not yet time.Timer, a timer that can be stopped
// before it fires. The small Timer below builds one from a fiber, an atomic flag and a buffered
// channel. Sleeps are scaled down 10x from the Go program.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// Go's *time.Timer: C receives the time once, d from now, unless stop() came first.
class Timer {
 public:
  explicit Timer(std::chrono::nanoseconds d) {
    weft::go([c = C, pending = pending_, d] {
      weft::this_fiber::sleep_for(d);
      if (pending->exchange(false)) c.send(std::chrono::steady_clock::now());
    });
  }
  // True if this call stopped the timer, false if it had already fired or been stopped.
  bool stop() { return pending_->exchange(false); }

  const weft::Chan<weft::TimePoint> C{1};

 private:
  std::shared_ptr<std::atomic<bool>> pending_ = std::make_shared<std::atomic<bool>>(true);
};

int main() {
  weft::run([] {
    // Timers represent a single event in the future. You tell the timer how long you want to
    // wait, and it provides a channel that will be notified at that time. This timer will wait
    // 200 ms.
    Timer timer1(200ms);

    // C.recv() blocks on the timer's channel until it sends a value indicating that the timer
    // fired. (For just this, weft::after(200ms).recv() would do.)
    timer1.C.recv();
    std::printf("Timer 1 fired\n");

    // If you just wanted to wait, you could have used sleep_for. One reason a timer may be
    // useful is that you can cancel the timer before it fires.
    Timer timer2(100ms);
    weft::go([c = timer2.C] {
      c.recv();
      std::printf("Timer 2 fired\n");
    });
    if (timer2.stop()) std::printf("Timer 2 stopped\n");

    // Give timer2 enough time to fire, if it ever was going to, to show it is in fact stopped.
    weft::this_fiber::sleep_for(200ms);
  });
}
