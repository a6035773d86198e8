// A Tour of Go: Goroutines -- https://go.dev/tour/concurrency/1
//
// `go say("world")` is weft::go(say, "world"). The two fibers interleave; the program ends when
// main's function returns, whether or not the other fiber has finished (as in Go). Sleeps are
// scaled down 5x from the Tour.
#include <chrono>
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

void say(const std::string& s) {
  for (int i = 0; i < 5; ++i) {
    weft::this_fiber::sleep_for(20ms);
    std::printf("%s\n", s.c_str());
  }
}

int main() {
  weft::run([] {
    weft::go(say, "world");
    say("hello");
  });
}
