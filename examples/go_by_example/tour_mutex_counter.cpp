// A Tour of Go: sync.Mutex -- https://go.dev/tour/concurrency/9
//
// Mutual exclusion with weft::Mutex, Go's sync.Mutex: it parks the fiber, never the worker.
// Sleeps are scaled down 5x from the Tour.
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// SafeCounter is safe to use concurrently.
class SafeCounter {
 public:
  // inc increments the counter for the given key.
  void inc(const std::string& key) {
    std::lock_guard lock(mu_);  // Lock so only one fiber at a time can access the map v_.
    v_[key]++;
  }
  // value returns the current value of the counter for the given key.
  int value(const std::string& key) {
    std::lock_guard lock(mu_);
    return v_[key];
  }

 private:
  weft::Mutex mu_;
  std::map<std::string, int> v_;
};

int main() {
  // The counter outlives weft::run: like the Tour, main waits for the fibers by sleeping, so it
  // must stay valid even for a fiber that is (in theory) still running when main's function ends.
  SafeCounter c;
  weft::run([&c] {
    for (int i = 0; i < 1000; ++i) weft::go([&c] { c.inc("somekey"); });

    weft::this_fiber::sleep_for(200ms);
    std::printf("%d\n", c.value("somekey"));
  });
}
