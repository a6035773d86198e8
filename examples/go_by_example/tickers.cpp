// Go by Example: Tickers -- https://gobyexample.com/tickers
//
// weft::Ticker is Go's time.Ticker: chan() receives the time every period until stop(). The
// ticks are printed as milliseconds since start (Go prints wall-clock times), and the periods are
// scaled down 5x from the Go program.
#include <chrono>
#include <cstdio>
#include <optional>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    const auto start = std::chrono::steady_clock::now();

    // Tickers use a similar mechanism to timers: a channel that is sent values. Here we'll use
    // select on the channel to await the values as they arrive every 100 ms.
    weft::Ticker ticker(100ms);
    weft::Chan<bool> done;

    weft::go([ticks = ticker.chan(), done, start] {
      for (;;) {
        // select returns the position of the case it ran; Go's `return` inside `case <-done:`
        // becomes a test of that position.
        const std::size_t chosen = weft::select(
            weft::case_recv(done),
            weft::case_recv(ticks, [start](std::optional<weft::TimePoint> t) {
              const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*t - start);
              std::printf("Tick at %lldms\n", static_cast<long long>(ms.count()));
            }));
        if (chosen == 0) return;
      }
    });

    // Tickers can be stopped like timers. Once a ticker is stopped it won't receive any more
    // values on its channel. We'll stop ours after 350 ms: it should have ticked 3 times.
    weft::this_fiber::sleep_for(350ms);
    ticker.stop();
    done.send(true);
    std::printf("Ticker stopped\n");
  });
}
