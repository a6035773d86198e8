// A Tour of Go: Select -- https://go.dev/tour/concurrency/5
//
// The select statement lets a fiber wait on multiple communication operations. It blocks until
// one of its cases can run, then runs that case (a random one if several are ready).
#include <cstdio>
#include <utility>
#include <weft/weft.hpp>

void fibonacci(const weft::Chan<int>& c, const weft::Chan<int>& quit) {
  int x = 0, y = 1;
  for (;;) {
    // select returns the position of the case it ran: 1 is the quit case, Go's `return`.
    const std::size_t chosen =
        weft::select(weft::case_send(c, x, [&] { x = std::exchange(y, x + y); }),
                     weft::case_recv(quit, [] { std::printf("quit\n"); }));
    if (chosen == 1) return;
  }
}

int main() {
  weft::run([] {
    weft::Chan<int> c;
    weft::Chan<int> quit;
    weft::go([c, quit] {
      for (int i = 0; i < 10; ++i) std::printf("%d\n", *c.recv());
      quit.send(0);
    });
    fibonacci(c, quit);
  });
}
