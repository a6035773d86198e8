// A Tour of Go: Range and Close -- https://go.dev/tour/concurrency/4
//
// A sender closes the channel to indicate that no more values will be sent; the receiver's range
// loop stops once the channel is closed and drained. Only the sender should close a channel.
#include <cstdio>
#include <utility>
#include <weft/weft.hpp>

void fibonacci(int n, weft::Chan<int> c) {
  int x = 0, y = 1;
  for (int i = 0; i < n; ++i) {
    c.send(x);
    x = std::exchange(y, x + y);  // x, y = y, x+y
  }
  c.close();
}

int main() {
  weft::run([] {
    weft::Chan<int> c(10);
    weft::go(fibonacci, static_cast<int>(c.capacity()), c);  // cap(c)
    for (int i : c) std::printf("%d\n", i);
  });
}
