// A Tour of Go: Default Selection -- https://go.dev/tour/concurrency/6
//
// The default case in a select runs if no other case is ready: use it to try a send or receive
// without blocking. Periods are scaled down 2x from the Tour (time.Tick is a Ticker that is
// never stopped, time.After is weft::after).
#include <chrono>
#include <cstdio>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    weft::Ticker tick(50ms);
    const weft::Chan<weft::TimePoint> boom = weft::after(250ms);
    for (;;) {
      const std::size_t chosen = weft::select(
          weft::case_recv(tick.chan(), [] { std::printf("tick.\n"); }),
          weft::case_recv(boom, [] { std::printf("BOOM!\n"); }), weft::case_default([] {
            std::printf("    .\n");
            weft::this_fiber::sleep_for(25ms);
          }));
      if (chosen == 1) return;  // BOOM!
    }
  });
}
