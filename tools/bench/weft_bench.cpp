// weft side of the side-by-side benchmarks (tools/bench/compare runs it against Go, Boost.Fiber and
// raw Boost.Context). Every bench is written with the public API only (docs: shared/design/api.md)
// and mirrors its peers line for line, so a ratio compares runtimes, not programs:
//   switch   two fibers on one worker yield to each other; ns per yield (Go: Gosched, 1 P)
//   spawn    one fiber spawns N empty fibers, a WaitGroup waits for all; ns per spawn, peak RSS
//   skynet   10-ary tree of fibers, weft::spawn + Task::join; sum verified; ms, peak RSS
//   park_mem N fibers parked on their own Semaphore(0); statm RSS delta per fiber
//   mutex    4*workers fibers increment one counter under weft::Mutex; count verified
// Interface and output: see bench_util.hpp.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>
#include <weft/runtime.hpp>

#include "bench_util.hpp"

namespace {

const char* g_prog = "weft_bench";

int bench_switch(const bench::Args& a) {
  if (a.workers_given && a.workers != 1) bench::usage_error(g_prog, "switch runs on one worker");
  const std::uint64_t half = bench::size_or(a, bench::kSwitchN) / 2;  // yields per fiber
  const double ns = weft::run(
      [half] {
        weft::WaitGroup wg;
        wg.add(2);
        auto body = [&wg, half] {
          for (std::uint64_t i = 0; i < half; ++i) weft::this_fiber::yield();
          wg.done();
        };
        const auto t0 = bench::Clock::now();
        weft::go(body);
        weft::go(body);
        wg.wait();
        return bench::ns_since(t0);
      },
      weft::Options{.workers = 1});
  bench::result("switch", "-", "ns_per_switch", ns / static_cast<double>(2 * half), "ns");
  return 0;
}

int bench_spawn(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kSpawnN);
  const double ns = weft::run(
      [n] {
        weft::WaitGroup wg;
        wg.add(static_cast<int>(n));
        const auto t0 = bench::Clock::now();
        for (std::uint64_t i = 0; i < n; ++i) weft::go([&wg] { wg.done(); });
        wg.wait();
        return bench::ns_since(t0);
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  const std::string v = bench::variant_of(a);
  bench::result("spawn", v, "ns_per_spawn", ns / static_cast<double>(n), "ns");
  bench::result("spawn", v, "peak_rss", bench::peak_rss_mib(), "MiB");
  return 0;
}

std::uint64_t skynet(std::uint64_t num, std::uint64_t size, std::uint64_t div) {
  if (size == 1) return num;
  const std::uint64_t sub = size / div;
  std::vector<weft::Task<std::uint64_t>> children;
  children.reserve(div);
  for (std::uint64_t i = 0; i < div; ++i) {
    children.push_back(weft::spawn([num, sub, div, i] { return skynet(num + i * sub, sub, div); }));
  }
  std::uint64_t sum = 0;
  for (auto& child : children) sum += child.join();
  return sum;
}

int bench_skynet(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kSkynetN);
  bench::check_skynet_size(g_prog, n);
  struct Out {
    std::uint64_t sum;
    double ns;
  };
  const Out out = weft::run(
      [n] {
        const auto t0 = bench::Clock::now();
        // The root is a fiber too, as in Go's `go skynet(c, 0, size, 10); <-c`.
        auto root = weft::spawn([n] { return skynet(0, n, bench::kSkynetDiv); });
        const std::uint64_t sum = root.join();
        return Out{sum, bench::ns_since(t0)};
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("skynet", out.sum, bench::skynet_expected(n))) return rc;
  const std::string v = bench::variant_of(a);
  bench::result("skynet", v, "time", out.ns / 1e6, "ms");
  bench::result("skynet", v, "peak_rss", bench::peak_rss_mib(), "MiB");
  return 0;
}

int bench_park_mem(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kParkN);
  const double bytes = weft::run(
      [n] {
        const std::uint64_t before = bench::current_rss_bytes();
        std::vector<std::unique_ptr<weft::Semaphore>> sems;
        sems.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i) sems.push_back(std::make_unique<weft::Semaphore>(0));
        weft::WaitGroup started;
        weft::WaitGroup finished;
        started.add(static_cast<int>(n));
        finished.add(static_cast<int>(n));
        for (std::uint64_t i = 0; i < n; ++i) {
          weft::go([&started, &finished, sem = sems[i].get()] {
            started.done();
            sem->acquire();
            finished.done();
          });
        }
        started.wait();
        // The last fiber to start is a few instructions from parking; give it time to get there.
        weft::this_fiber::sleep_for(std::chrono::milliseconds(20));
        const std::uint64_t parked = bench::current_rss_bytes();
        for (auto& sem : sems) sem->release();
        finished.wait();
        return (static_cast<double>(parked) - static_cast<double>(before)) / static_cast<double>(n);
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  bench::result("park_mem", bench::variant_of(a), "bytes_per_fiber", bytes, "B");
  return 0;
}

int bench_mutex(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kMutexN);
  const unsigned workers = bench::resolve_workers(a);
  struct Out {
    std::uint64_t count;
    double ns;
  };
  const Out out = weft::run(
      [n, workers] {
        const std::uint64_t fibers = 4ull * workers;
        weft::Mutex mu;
        std::uint64_t counter = 0;
        weft::WaitGroup wg;
        wg.add(static_cast<int>(fibers));
        const auto t0 = bench::Clock::now();
        for (std::uint64_t f = 0; f < fibers; ++f) {
          const std::uint64_t mine = n / fibers + (f < n % fibers ? 1 : 0);
          weft::go([&mu, &counter, &wg, mine] {
            for (std::uint64_t i = 0; i < mine; ++i) {
              std::lock_guard<weft::Mutex> lock(mu);
              ++counter;
            }
            wg.done();
          });
        }
        wg.wait();  // orders every increment before the read below
        return Out{counter, bench::ns_since(t0)};
      },
      weft::Options{.workers = workers});
  if (int rc = bench::verify("mutex", out.count, n)) return rc;
  const std::string v = bench::variant_of(a);
  bench::result("mutex", v, "time", out.ns / 1e6, "ms");
  bench::result("mutex", v, "ns_per_increment", out.ns / static_cast<double>(n), "ns");
  return 0;
}

// timer: how late sleep_for(1 ms) returns on an otherwise idle runtime (the issue's "lateness
// under light load is at most 1 ms"). Median, p99 and max over N sleeps, in microseconds.
int bench_timer(const bench::Args& a) {
  const std::uint64_t n = a.n ? a.n : 500;
  std::vector<double> late = weft::run(
      [n] {
        std::vector<double> out;
        out.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i) {
          const auto t0 = bench::Clock::now();
          weft::this_fiber::sleep_for(std::chrono::milliseconds(1));
          out.push_back(bench::ns_since(t0) / 1000.0 - 1000.0);
        }
        return out;
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  std::sort(late.begin(), late.end());
  const std::string v = bench::variant_of(a);
  bench::result("timer", v, "late_p50", late[late.size() / 2], "us");
  bench::result("timer", v, "late_p99", late[late.size() * 99 / 100], "us");
  bench::result("timer", v, "late_max", late.back(), "us");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0) g_prog = argv[0];
  const bench::Args a = bench::parse_args(argc, argv);
  if (a.bench == "switch") return bench_switch(a);
  if (a.bench == "spawn") return bench_spawn(a);
  if (a.bench == "skynet") return bench_skynet(a);
  if (a.bench == "park_mem") return bench_park_mem(a);
  if (a.bench == "mutex") return bench_mutex(a);
  if (a.bench == "timer") return bench_timer(a);
  bench::usage_error(g_prog,
                     "unsupported bench: " + a.bench +
                         " (weft implements switch, spawn, skynet, park_mem, mutex, timer)");
}
