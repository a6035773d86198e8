// Go by Example: Rate Limiting -- https://gobyexample.com/rate-limiting
//
// A Ticker's channel paces a loop; a buffered channel of tokens refilled by a ticker allows
// bursts. Times are printed as milliseconds since start (Go prints wall-clock times), and the
// periods are scaled down 10x from the Go program (200 ms -> 20 ms).
#include <chrono>
#include <cstdio>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    const auto start = std::chrono::steady_clock::now();
    auto since_start = [start] {
      return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - start)
                                        .count());
    };

    // First we'll look at basic rate limiting. Suppose we want to limit our handling of incoming
    // requests. We'll serve these requests off a channel of the same name.
    weft::Chan<int> requests(5);
    for (int i = 1; i <= 5; ++i) requests.send(i);
    requests.close();

    // This limiter channel will receive a value every 20 ms. It is the regulator in our
    // rate limiting scheme. (Go's time.Tick is a Ticker that is never stopped.)
    weft::Ticker limiter(20ms);

    // By blocking on a receive from the limiter channel before serving each request, we limit
    // ourselves to 1 request every 20 ms.
    for (int req : requests) {
      limiter.chan().recv();
      std::printf("request %d at %lldms\n", req, since_start());
    }

    // We may want to allow short bursts of requests in our rate limiting scheme while preserving
    // the overall rate limit. We can accomplish this by buffering our limiter channel. This
    // bursty_limiter channel will allow bursts of up to 3 events.
    weft::Chan<weft::TimePoint> bursty_limiter(3);

    // Fill up the channel to represent allowed bursting.
    for (int i = 0; i < 3; ++i) bursty_limiter.send(std::chrono::steady_clock::now());

    // Every 20 ms we'll try to add a new value to bursty_limiter, up to its limit of 3.
    weft::go([bursty_limiter] {
      weft::Ticker tick(20ms);
      for (weft::TimePoint t : tick.chan()) bursty_limiter.send(t);
    });

    // Now simulate 5 more incoming requests. The first 3 of these will benefit from the burst
    // capability of bursty_limiter.
    weft::Chan<int> bursty_requests(5);
    for (int i = 1; i <= 5; ++i) bursty_requests.send(i);
    bursty_requests.close();
    for (int req : bursty_requests) {
      bursty_limiter.recv();
      std::printf("request %d at %lldms\n", req, since_start());
    }
  });
}
