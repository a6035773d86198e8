// Go by Example: Select -- https://gobyexample.com/select
//
// weft::select waits on several channel operations at once; each case_recv's handler gets the
// received value as a std::optional, std::nullopt if that channel is closed (Go's `v, ok := <-c`).
// These channels are never closed, so the handlers just take .value(). Sleeps are scaled down 10x.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    // For our example we'll select across two channels.
    weft::Chan<std::string> c1;
    weft::Chan<std::string> c2;

    // Each channel will receive a value after some amount of time, to simulate e.g. blocking RPC
    // operations executing in concurrent fibers.
    weft::go([c1] {
      weft::this_fiber::sleep_for(100ms);
      c1.send("one");
    });
    weft::go([c2] {
      weft::this_fiber::sleep_for(200ms);
      c2.send("two");
    });

    // We'll use select to await both of these values simultaneously, printing each one as it
    // arrives.
    for (int i = 0; i < 2; ++i) {
      weft::select(weft::case_recv(c1,
                                   [](std::optional<std::string> msg1) {
                                     std::printf("received %s\n", msg1.value().c_str());
                                   }),
                   weft::case_recv(c2, [](std::optional<std::string> msg2) {
                     std::printf("received %s\n", msg2.value().c_str());
                   }));
    }
  });
}
