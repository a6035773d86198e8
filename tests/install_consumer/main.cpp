// Consumer of an installed weft: runs a tiny fiber program through the umbrella header and target
// and prints its result; the install test checks the line "weft consumer: 42 from 3 fibers" and
// the exit code.
#include <cstdio>
#include <weft/weft.hpp>

int main() {
  weft::Stats st;
  const int value = weft::run(
      [&] {
        weft::Chan<int> ch(1);
        auto a = weft::spawn([ch] { ch.send(40); });
        auto b = weft::spawn([] {
          weft::this_fiber::yield();
          return 2;
        });
        a.join();
        const int sum = *ch.recv() + b.join();
        st = weft::stats();
        return sum;
      },
      weft::Options{.workers = 2});
  std::printf("weft consumer: %d from %llu fibers\n", value,
              static_cast<unsigned long long>(st.fibers_spawned));
  return value == 42 ? 0 : 1;
}
