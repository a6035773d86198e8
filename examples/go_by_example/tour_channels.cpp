// A Tour of Go: Channels -- https://go.dev/tour/concurrency/2
//
// Sums the numbers in a slice, distributing the work between two fibers. Once both have finished
// their computation, it calculates the final result. Which half arrives first varies, as in Go.
#include <cstdio>
#include <span>
#include <vector>
#include <weft/weft.hpp>

void sum(std::span<const int> s, weft::Chan<int> c) {
  int sum = 0;
  for (int v : s) sum += v;
  c.send(sum);  // send sum to c
}

int main() {
  weft::run([] {
    const std::vector<int> s = {7, 2, 8, -9, 4, 0};
    const std::span<const int> all(s);

    weft::Chan<int> c;
    weft::go(sum, all.first(all.size() / 2), c);
    weft::go(sum, all.subspan(all.size() / 2), c);
    const int x = *c.recv();  // receive from c
    const int y = *c.recv();

    std::printf("%d %d %d\n", x, y, x + y);
  });
}
