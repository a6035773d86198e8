// Go by Example: WaitGroups -- https://gobyexample.com/waitgroups
//
// weft::WaitGroup is Go's sync.WaitGroup: add(n), done(), wait(). Sleeps are scaled down 10x
// from the Go program.
#include <chrono>
#include <cstdio>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// This is the function we'll run in every fiber.
void worker(int id) {
  std::printf("Worker %d starting\n", id);

  // Sleep to simulate an expensive task.
  weft::this_fiber::sleep_for(100ms);
  std::printf("Worker %d done\n", id);
}

int main() {
  weft::run([] {
    // This WaitGroup is used to wait for all the fibers launched here to finish.
    weft::WaitGroup wg;

    // Launch several fibers and increment the WaitGroup counter for each. The lambda wraps the
    // worker call so the worker itself need not know about the WaitGroup.
    for (int i = 1; i <= 5; ++i) {
      wg.add(1);
      weft::go([&wg, i] {
        worker(i);
        wg.done();
      });
    }

    // Block until the WaitGroup counter goes back to 0; all the workers notified they're done.
    wg.wait();
  });
}
