// weft side of the side-by-side benchmarks (tools/bench/compare runs it against Go, Boost.Fiber and
// raw Boost.Context). Every bench is written with the public API only (docs/api.md)
// and mirrors its peers line for line, so a ratio compares runtimes, not programs:
//   switch   two fibers on one worker yield to each other; ns per yield (Go: Gosched, 1 P)
//   spawn    one fiber spawns N empty fibers, a WaitGroup waits for all; ns per spawn, peak RSS
//   skynet   the classic skynet: 10-ary tree of fibers (weft::go), each node sums its children
//            through its own unbuffered Chan, as the original does; sum verified; ms, peak RSS
//   park_mem N fibers parked on their own Semaphore(0); statm RSS delta per fiber, and ns per
//            fiber from the first spawn until the last one started (a few instructions from its
//            park): first-touch faults on fresh stacks are most of it
//   hib_wake wake-up latency of a fiber whose stack is hibernated (p50, p99; weft only)
//   park_idle the same, read after they were parked 3 s (stacks hibernated: Options::
//            hibernate_after); Go frees its heap first (debug.FreeOSMemory)
//   mutex    4*workers fibers increment one counter under weft::Mutex; count verified
//   chan_pingpong two fibers, two unbuffered Chan<int>: one sends i on ping and waits for the
//            reply on pong, the other echoes; N round trips; sum verified; ns per round trip.
//            Run on 1 and 2 workers: the scheduler decides itself where the two fibers run
//   chan_mpmc 4 producers send disjoint ranges of 0..N-1 into one Chan<int> of capacity 1024, 4
//            consumers receive until it is closed and sum; sum and count verified; ns per item
//   select2  two producers each send half of 0..N-1 into their own Chan<int> of capacity 128;
//            one consumer runs N selects over both; sum verified; ns per select
//   ctx      one fiber creates N with_cancel children of a long-lived cancellable context and
//            cancels each at once (each registers with its parent and leaves it); ns per pair
//   rwmutex  8 readers share N read sections (lock_shared, read a counter, unlock_shared) while
//            one writer makes N/100 write sections (lock, increment, unlock); count verified;
//            ns per section (reads + writes)
//   fiber_local one fiber reads its FiberLocal<int64> N times (Go has no goroutine-local
//            storage: its idiom, ctx.Value on a one-value context, is the peer); sum verified
//   select_ctx a producer sends 0..N-1 into a Chan<int> of capacity 128; the consumer runs N
//            selects over it and a live context's done(); sum verified; ns per select
// Interface and output: see bench_util.hpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>
#include <weft/weft.hpp>

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

void skynet(const weft::Chan<std::uint64_t>& out, std::uint64_t num, std::uint64_t size,
            std::uint64_t div) {
  if (size == 1) {
    out.send(num);
    return;
  }
  weft::Chan<std::uint64_t> rc;
  const std::uint64_t sub = size / div;
  for (std::uint64_t i = 0; i < div; ++i) {
    weft::go([rc, num, sub, div, i] { skynet(rc, num + i * sub, sub, div); });
  }
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < div; ++i) sum += *rc.recv();
  out.send(sum);
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
        weft::Chan<std::uint64_t> c;
        weft::go([c, n] { skynet(c, 0, n, bench::kSkynetDiv); });
        const std::uint64_t sum = *c.recv();
        return Out{sum, bench::ns_since(t0)};
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("skynet", out.sum, bench::skynet_expected(n))) return rc;
  const std::string v = bench::variant_of(a);
  bench::result("skynet", v, "time", out.ns / 1e6, "ms");
  bench::result("skynet", v, "peak_rss", bench::peak_rss_mib(), "MiB");
  return 0;
}

// park_mem and park_idle: N fibers parked on their own Semaphore(0), RSS delta per fiber read
// `settle` after the last one parked (park_idle: 3 s, past Options::hibernate_after).
int park_rss(const bench::Args& a, const char* name, std::chrono::milliseconds settle) {
  const std::uint64_t n = bench::size_or(a, bench::kParkN);
  double park_ns = 0;
  const double bytes = weft::run(
      [n, settle, &park_ns] {
        const std::uint64_t before = bench::current_rss_bytes();
        std::vector<std::unique_ptr<weft::Semaphore>> sems;
        sems.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i) sems.push_back(std::make_unique<weft::Semaphore>(0));
        weft::WaitGroup started;
        weft::WaitGroup finished;
        started.add(static_cast<int>(n));
        finished.add(static_cast<int>(n));
        const auto t0 = bench::Clock::now();
        for (std::uint64_t i = 0; i < n; ++i) {
          weft::go([&started, &finished, sem = sems[i].get()] {
            started.done();
            sem->acquire();
            finished.done();
          });
        }
        started.wait();
        park_ns = static_cast<double>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(bench::Clock::now() - t0)
                          .count()) /
                  static_cast<double>(n);
        // The last fiber to start is a few instructions from parking; give it time to get there.
        weft::this_fiber::sleep_for(settle);
        const std::uint64_t parked = bench::current_rss_bytes();
        for (auto& sem : sems) sem->release();
        finished.wait();
        return (static_cast<double>(parked) - static_cast<double>(before)) / static_cast<double>(n);
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  bench::result(name, bench::variant_of(a), "bytes_per_fiber", bytes, "B");
  bench::result(name, bench::variant_of(a), "park_ns", park_ns, "ns");
  return 0;
}

int bench_park_mem(const bench::Args& a) {
  return park_rss(a, "park_mem", std::chrono::milliseconds(20));
}
int bench_park_idle(const bench::Args& a) {
  return park_rss(a, "park_idle", std::chrono::milliseconds(a.n && a.n < 10000 ? 1500 : 3000));
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

// hib_wake: N fibers parked on their own Semaphore until every stack is hibernated, then woken
// one at a time: the time from release() to the fiber running again, which includes bringing its
// stack back (the release writes the waiter record on the hibernated stack: a userfaultfd
// fault the hibernator thread serves). Percentiles in microseconds.
int bench_hib_wake(const bench::Args& a) {
  const std::uint64_t n = a.n ? a.n : 2000;
  std::vector<double> lat = weft::run(
      [n] {
        std::vector<std::unique_ptr<weft::Semaphore>> sems;
        for (std::uint64_t i = 0; i < n; ++i) sems.push_back(std::make_unique<weft::Semaphore>(0));
        std::vector<bench::Clock::time_point> woke(n);
        weft::Chan<int> ran(1);
        for (std::uint64_t i = 0; i < n; ++i) {
          weft::go([&woke, &ran, sem = sems[i].get(), i] {
            sem->acquire();
            woke[i] = bench::Clock::now();
            ran.send(1);
          });
        }
        const auto deadline = bench::Clock::now() + std::chrono::seconds(30);
        while (weft::stats().fibers_hibernated < n && bench::Clock::now() < deadline) {
          weft::this_fiber::sleep_for(std::chrono::milliseconds(20));
        }
        if (weft::stats().fibers_hibernated < n) {
          std::fprintf(stderr,
                       "weft_bench: hib_wake: only %llu of %llu fibers hibernated in 30 s "
                       "(is userfaultfd available? WEFT_HIBERNATE_AFTER=0?)\n",
                       static_cast<unsigned long long>(weft::stats().fibers_hibernated),
                       static_cast<unsigned long long>(n));
        }
        std::vector<double> out;
        out.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i) {
          const auto t0 = bench::Clock::now();
          sems[i]->release();
          ran.recv();
          out.push_back(std::chrono::duration<double, std::micro>(woke[i] - t0).count());
        }
        return out;
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  std::sort(lat.begin(), lat.end());
  const std::string v = bench::variant_of(a);
  bench::result("hib_wake", v, "wake_p50", lat[lat.size() / 2], "us");
  bench::result("hib_wake", v, "wake_p99", lat[lat.size() * 99 / 100], "us");
  return 0;
}

// n*(n-1)/2, the sum of 0..n-1, which every channel bench sends.
std::int64_t sum_below(std::int64_t n) { return n * (n - 1) / 2; }

int bench_chan_pingpong(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kChanPingPongN));
  struct Out {
    std::int64_t sum;
    double ns;
  };
  const Out out = weft::run(
      [n] {
        weft::Chan<int> ping, pong;
        std::int64_t sum = 0;
        weft::WaitGroup wg;
        wg.add(2);
        const auto t0 = bench::Clock::now();
        weft::go([&] {  // the echo
          for (std::int64_t i = 0; i < n; ++i) pong.send(*ping.recv());
          wg.done();
        });
        weft::go([&] {
          for (std::int64_t i = 0; i < n; ++i) {
            ping.send(static_cast<int>(i));
            sum += *pong.recv();
          }
          wg.done();
        });
        wg.wait();
        return Out{sum, bench::ns_since(t0)};
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("chan_pingpong", out.sum, sum_below(n))) return rc;
  bench::result("chan_pingpong", bench::variant_of(a), "ns_per_roundtrip",
                out.ns / static_cast<double>(n), "ns");
  return 0;
}

int bench_chan_mpmc(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kChanMpmcN));
  struct Out {
    std::int64_t sum, count;
    double ns;
  };
  const Out out = weft::run(
      [n] {
        weft::Chan<int> ch(bench::kMpmcCapacity);
        std::vector<std::int64_t> sums(bench::kMpmcConsumers), counts(bench::kMpmcConsumers);
        weft::WaitGroup producers, consumers;
        producers.add(bench::kMpmcProducers);
        consumers.add(bench::kMpmcConsumers);
        const auto t0 = bench::Clock::now();
        for (unsigned c = 0; c < bench::kMpmcConsumers; ++c) {
          weft::go([&, c] {
            std::int64_t sum = 0, count = 0;
            for (int v : ch) {
              sum += v;
              ++count;
            }
            sums[c] = sum;
            counts[c] = count;
            consumers.done();
          });
        }
        for (std::int64_t p = 0; p < bench::kMpmcProducers; ++p) {
          const int lo = static_cast<int>(n * p / bench::kMpmcProducers);
          const int hi = static_cast<int>(n * (p + 1) / bench::kMpmcProducers);
          weft::go([&, lo, hi] {
            for (int i = lo; i < hi; ++i) ch.send(i);
            producers.done();
          });
        }
        producers.wait();
        ch.close();
        consumers.wait();
        const double ns = bench::ns_since(t0);
        Out o{0, 0, ns};
        for (unsigned c = 0; c < bench::kMpmcConsumers; ++c) {
          o.sum += sums[c];
          o.count += counts[c];
        }
        return o;
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("chan_mpmc", out.count, n)) return rc;
  if (int rc = bench::verify("chan_mpmc", out.sum, sum_below(n))) return rc;
  bench::result("chan_mpmc", bench::variant_of(a), "ns_per_item", out.ns / static_cast<double>(n),
                "ns");
  return 0;
}

int bench_select2(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kSelect2N));
  struct Out {
    std::int64_t sum;
    double ns;
  };
  const Out out = weft::run(
      [n] {
        weft::Chan<int> ca(bench::kSelect2Capacity), cb(bench::kSelect2Capacity);
        std::int64_t sum = 0;
        weft::WaitGroup wg;
        wg.add(3);
        auto send = [&wg](weft::Chan<int> ch, int lo, int hi) {
          for (int i = lo; i < hi; ++i) ch.send(i);
          wg.done();
        };
        const auto t0 = bench::Clock::now();
        weft::go([&] {  // the consumer
          for (std::int64_t i = 0; i < n; ++i) {
            weft::select(weft::case_recv(ca, [&](std::optional<int> v) { sum += *v; }),
                         weft::case_recv(cb, [&](std::optional<int> v) { sum += *v; }));
          }
          wg.done();
        });
        weft::go([&] { send(ca, 0, static_cast<int>(n / 2)); });
        weft::go([&] { send(cb, static_cast<int>(n / 2), static_cast<int>(n)); });
        wg.wait();
        return Out{sum, bench::ns_since(t0)};
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("select2", out.sum, sum_below(n))) return rc;
  bench::result("select2", bench::variant_of(a), "ns_per_select", out.ns / static_cast<double>(n),
                "ns");
  return 0;
}

int bench_ctx(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kCtxN));
  const double ns = weft::run(
      [n] {
        auto [parent, cancel_parent] = weft::with_cancel(weft::background());
        const auto t0 = bench::Clock::now();
        for (std::int64_t i = 0; i < n; ++i) {
          auto [ctx, cancel] = weft::with_cancel(parent);
          cancel();
        }
        const double t = bench::ns_since(t0);
        cancel_parent();
        return t;
      },
      weft::Options{.workers = bench::resolve_workers(a),
                    .watchdog_threshold = std::chrono::milliseconds(0)});
  bench::result("ctx", bench::variant_of(a), "ns_per_create_cancel", ns / static_cast<double>(n),
                "ns");
  return 0;
}

int bench_rwmutex(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kRwN));
  const std::int64_t writes = n / static_cast<std::int64_t>(bench::kRwWriteEvery);
  struct Out {
    std::int64_t counter, reads;
    double ns;
  };
  const Out out = weft::run(
      [n, writes] {
        weft::RWMutex mu;
        std::int64_t counter = 0;
        std::atomic<std::int64_t> reads{0};
        weft::WaitGroup wg;
        wg.add(bench::kRwReaders + 1);
        const auto t0 = bench::Clock::now();
        for (unsigned r = 0; r < bench::kRwReaders; ++r) {
          const std::int64_t mine = n / bench::kRwReaders + (r < n % bench::kRwReaders ? 1 : 0);
          weft::go([&, mine] {
            std::int64_t seen = 0;
            for (std::int64_t i = 0; i < mine; ++i) {
              std::shared_lock lock(mu);
              seen += counter >= 0 ? 1 : 0;
            }
            reads.fetch_add(seen);
            wg.done();
          });
        }
        weft::go([&] {
          for (std::int64_t i = 0; i < writes; ++i) {
            std::lock_guard lock(mu);
            ++counter;
          }
          wg.done();
        });
        wg.wait();
        return Out{counter, reads.load(), bench::ns_since(t0)};
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("rwmutex", out.counter, writes)) return rc;
  if (int rc = bench::verify("rwmutex", out.reads, n)) return rc;
  bench::result("rwmutex", bench::variant_of(a), "ns_per_section",
                out.ns / static_cast<double>(n + writes), "ns");
  return 0;
}

int bench_fiber_local(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kLocalN));
  struct Out {
    std::int64_t sum;
    double ns;
  };
  const Out out = weft::run(
      [n] {
        static weft::FiberLocal<std::int64_t> local;
        local.get() = 1;
        std::int64_t sum = 0;
        const auto t0 = bench::Clock::now();
        for (std::int64_t i = 0; i < n; ++i) sum += local.get();
        return Out{sum, bench::ns_since(t0)};
      },
      weft::Options{.workers = bench::resolve_workers(a),
                    .watchdog_threshold = std::chrono::milliseconds(0)});
  if (int rc = bench::verify("fiber_local", out.sum, n)) return rc;
  bench::result("fiber_local", bench::variant_of(a), "ns_per_get", out.ns / static_cast<double>(n),
                "ns");
  return 0;
}

int bench_select_ctx(const bench::Args& a) {
  const std::int64_t n = static_cast<std::int64_t>(bench::size_or(a, bench::kSelectCtxN));
  struct Out {
    std::int64_t sum;
    double ns;
  };
  const Out out = weft::run(
      [n] {
        weft::Chan<int> ch(bench::kSelect2Capacity);
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        std::int64_t sum = 0;
        weft::WaitGroup wg;
        wg.add(2);
        const auto t0 = bench::Clock::now();
        weft::go([&, done = ctx.done()] {  // the consumer
          for (std::int64_t i = 0; i < n; ++i) {
            weft::select(weft::case_recv(ch, [&](std::optional<int> v) { sum += *v; }),
                         weft::case_recv(done));
          }
          wg.done();
        });
        weft::go([&] {
          for (int i = 0; i < static_cast<int>(n); ++i) ch.send(i);
          wg.done();
        });
        wg.wait();
        const double t = bench::ns_since(t0);
        cancel();
        return Out{sum, t};
      },
      weft::Options{.workers = bench::resolve_workers(a)});
  if (int rc = bench::verify("select_ctx", out.sum, sum_below(n))) return rc;
  bench::result("select_ctx", bench::variant_of(a), "ns_per_select",
                out.ns / static_cast<double>(n), "ns");
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
  if (a.bench == "park_idle") return bench_park_idle(a);
  if (a.bench == "mutex") return bench_mutex(a);
  if (a.bench == "timer") return bench_timer(a);
  if (a.bench == "hib_wake") return bench_hib_wake(a);
  if (a.bench == "chan_pingpong") return bench_chan_pingpong(a);
  if (a.bench == "chan_mpmc") return bench_chan_mpmc(a);
  if (a.bench == "select2") return bench_select2(a);
  if (a.bench == "ctx") return bench_ctx(a);
  if (a.bench == "rwmutex") return bench_rwmutex(a);
  if (a.bench == "fiber_local") return bench_fiber_local(a);
  if (a.bench == "select_ctx") return bench_select_ctx(a);
  bench::usage_error(
      g_prog,
      "unsupported bench: " + a.bench +
          " (weft implements switch, spawn, skynet, park_mem, park_idle, mutex, timer, hib_wake, "
          "chan_pingpong, chan_mpmc, select2, ctx, rwmutex, fiber_local, "
          "select_ctx)");
}
