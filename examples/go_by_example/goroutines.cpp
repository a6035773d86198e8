// Go by Example: Goroutines -- https://gobyexample.com/goroutines
//
// Go's `go f(x)` is weft::go(f, x): it starts a fiber, a lightweight thread that weft's M:N
// scheduler runs on a few kernel threads. Sleeps are scaled down 10x from the Go program.
#include <chrono>
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

void f(const std::string& from) {
  for (int i = 0; i < 3; ++i) std::printf("%s : %d\n", from.c_str(), i);
}

int main() {
  weft::run([] {
    // An ordinary call runs synchronously.
    f("direct");

    // A fiber runs concurrently with the calling one; its arguments are copied, as with go.
    weft::go(f, "goroutine");

    // A fiber for an anonymous function.
    weft::go([](const std::string& msg) { std::printf("%s\n", msg.c_str()); }, "going");

    // The two fibers now run asynchronously. Wait for them to finish (waitgroups.cpp shows the
    // robust way: a WaitGroup).
    weft::this_fiber::sleep_for(100ms);
    std::printf("done\n");
  });
}
