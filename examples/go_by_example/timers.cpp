// Go by Example: Timers -- https://gobyexample.com/timers
//
// weft::Timer is Go's time.Timer (time.NewTimer): chan() receives the time once, unless stop()
// came first. Sleeps are scaled down 10x from the Go program.
#include <chrono>
#include <cstdio>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    // Timers represent a single event in the future. You tell the timer how long you want to
    // wait, and it provides a channel that will be notified at that time. This timer will wait
    // 200 ms.
    weft::Timer timer1(200ms);

    // chan().recv() blocks on the timer's channel until it sends a value indicating that the
    // timer fired. (For just this, weft::after(200ms).recv() would do.)
    timer1.chan().recv();
    std::printf("Timer 1 fired\n");

    // If you just wanted to wait, you could have used sleep_for. One reason a timer may be
    // useful is that you can cancel the timer before it fires.
    weft::Timer timer2(100ms);
    weft::go([c = timer2.chan()] {
      c.recv();
      std::printf("Timer 2 fired\n");
    });
    if (timer2.stop()) std::printf("Timer 2 stopped\n");

    // Give timer2 enough time to fire, if it ever was going to, to show it is in fact stopped.
    weft::this_fiber::sleep_for(200ms);
  });
}
