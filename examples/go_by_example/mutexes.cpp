// Go by Example: Mutexes -- https://gobyexample.com/mutexes
//
// weft::Mutex is Go's sync.Mutex: it parks the fiber, never the worker thread, and works with
// std::lock_guard (Go's `Lock(); defer Unlock()`).
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <weft/weft.hpp>

// Container holds a map of counters; since we want to update it concurrently from multiple
// fibers, we add a Mutex to synchronize access. Like Go's, a weft::Mutex must not be copied.
struct Container {
  weft::Mutex mu;
  std::map<std::string, int> counters;

  // Lock the mutex before accessing counters; the lock_guard unlocks it at the end of the scope.
  void inc(const std::string& name) {
    std::lock_guard lock(mu);
    counters[name]++;
  }
};

int main() {
  weft::run([] {
    // Note that the zero value of a mutex is usable as-is, so no initialization is required here.
    Container c;
    c.counters = {{"a", 0}, {"b", 0}};

    weft::WaitGroup wg;

    // This function increments a named counter in a loop.
    auto do_increment = [&](const std::string& name, int n) {
      for (int i = 0; i < n; ++i) c.inc(name);
      wg.done();
    };

    // Run several fibers concurrently; note that they all access the same Container, and two of
    // them access the same counter.
    wg.add(3);
    weft::go(do_increment, "a", 10000);
    weft::go(do_increment, "a", 10000);
    weft::go(do_increment, "b", 10000);

    // Wait for the fibers to finish, then print the counters as Go's fmt prints a map.
    wg.wait();
    std::string out = "map[";
    for (const auto& [name, n] : c.counters) {
      if (out.size() > 4) out += ' ';
      out += name + ":" + std::to_string(n);
    }
    std::printf("%s]\n", out.c_str());
  });
}
