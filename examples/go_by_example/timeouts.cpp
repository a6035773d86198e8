// Go by Example: Timeouts -- https://gobyexample.com/timeouts
//
// weft::after(d) is Go's time.After: a channel that receives the time once, d from now. Selecting
// on it bounds a wait. (weft::case_timeout(d, handler) is a shorthand for the same case.) Sleeps
// are scaled down 10x from the Go program.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    // Suppose we're executing an external call that returns its result on a channel c1 after
    // 200 ms. The channel is buffered, so the send in the fiber is nonblocking: this prevents
    // a fiber leak in case the channel is never read.
    weft::Chan<std::string> c1(1);
    weft::go([c1] {
      weft::this_fiber::sleep_for(200ms);
      c1.send("result 1");
    });

    // The select proceeds with the first receive that's ready: the result, or the timeout after
    // 100 ms.
    weft::select(
        weft::case_recv(
            c1, [](std::optional<std::string> res) { std::printf("%s\n", res.value().c_str()); }),
        weft::case_recv(weft::after(100ms), [] { std::printf("timeout 1\n"); }));

    // With a longer timeout of 300 ms, the receive from c2 succeeds and prints the result.
    weft::Chan<std::string> c2(1);
    weft::go([c2] {
      weft::this_fiber::sleep_for(200ms);
      c2.send("result 2");
    });
    weft::select(
        weft::case_recv(
            c2, [](std::optional<std::string> res) { std::printf("%s\n", res.value().c_str()); }),
        weft::case_recv(weft::after(300ms), [] { std::printf("timeout 2\n"); }));
  });
}
