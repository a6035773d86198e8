// Boost.Fiber (1.74) side of weft's side-by-side benchmarks (tools/bench/compare). Same
// definitions, command line and RESULT lines as weft_bench.cpp (see bench_util.hpp), using
// Boost.Fiber the way its own docs and examples do: default stacks (fixedsize_stack, 128 KiB from
// malloc), fibers launched with launch::post (the default) and, for several threads, the
// work_stealing algorithm installed on every thread (idle threads busy-poll, its default: with
// suspend=true a sleeping thread is never woken to steal).
//   switch   two fibers on one thread (round_robin) call boost::this_fiber::yield(); ns per yield
//   spawn    one fiber spawns N detached empty fibers, a WaitGroup waits; ns per spawn, peak RSS
//   skynet   10-ary tree of detached fibers; each child pushes its sum on its parent's
//            buffered_channel (capacity 16: holds 15, so no child ever blocks) and the parent pops
//            10 values; sum verified; ms, RSS. This is Boost's own channel skynet
//            (performance/fiber/skynet_stealing_detach.cpp) but for default stacks:
//            launch::dispatch (the child runs at once); launch::post measured several times slower
//            and several times the memory, so dispatch is Boost at its best here
//   park_mem N fibers each blocked on its own mutex/condvar semaphore; statm RSS delta per fiber;
//            ns per fiber from the first spawn until the last one started
//   mutex    4*workers fibers increment one counter under boost::fibers::mutex; count verified
//   chan_pingpong two unbuffered_channel<uint64_t>: the main fiber sends i on ping and pops the
//            reply from pong, an echo pops and pushes it back; N round trips; sum of the replies
//            verified; ns per round trip. One worker: the echo is a fiber on the same thread. More:
//            the echo is worker 1's main fiber, and main fibers are pinned (work_stealing never
//            steals a main context), so every hand-off crosses threads: the cross-thread figure
//   chan_mpmc 4 producer fibers push disjoint ranges of 0..N-1 into one buffered_channel(1024)
//            (Boost's ring keeps one slot free: it holds 1023), 4 consumer fibers pop until it is
//            closed and sum; sum and count verified; ns per item
//   select2  not implemented: Boost.Fiber has no select over channels, and polling try_pop in a
//            loop would measure something else
// Boost.Fiber has no WaitGroup: the one below is Go's (an atomic count; only the last done() takes
// the lock to wake the waiter).
#include <atomic>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "bench_util.hpp"

namespace {

const char* g_prog = "boostfiber_bench";

// Objects here must outlive every fiber that touches them (done() may still be unlocking the mutex
// on another thread when wait() returns), so the benches keep them until the workers are joined.
class WaitGroup {
 public:
  void add(std::int64_t n) { count_.fetch_add(n, std::memory_order_relaxed); }
  void done() {
    if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<boost::fibers::mutex> lock(mu_);
      zero_ = true;
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    cv_.wait(lock, [this] { return zero_; });
  }

 private:
  std::atomic<std::int64_t> count_{0};
  boost::fibers::mutex mu_;
  boost::fibers::condition_variable cv_;
  bool zero_ = false;
};

// A binary semaphore that parks fibers: Boost.Fiber's mutex + condition_variable.
class Semaphore {
 public:
  void acquire() {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    cv_.wait(lock, [this] { return count_ > 0; });
    --count_;
  }
  void release() {
    std::lock_guard<boost::fibers::mutex> lock(mu_);
    ++count_;
    cv_.notify_one();
  }

 private:
  boost::fibers::mutex mu_;
  boost::fibers::condition_variable cv_;
  std::uint64_t count_ = 0;
};

// Runs `fn` in the main fiber of this thread with `workers` threads running fibers. One worker:
// the default round_robin scheduler (work_stealing with a single thread would spin forever looking
// for a victim other than itself). Several: work_stealing on this thread and workers-1 helpers,
// whose main fibers just wait for the end; worker 1's runs `on_worker1` first (main fibers are
// never stolen, so it stays on that thread; with one worker there is no worker 1 and `on_worker1`
// is not run). The constructor's barrier makes every thread install it before any of them runs
// fibers.
template <class F, class G>
void with_workers(unsigned workers, F&& fn, G&& on_worker1) {
  if (workers <= 1) {
    fn();
    return;
  }
  boost::fibers::mutex stop_mu;
  boost::fibers::condition_variable stop_cv;
  bool stop = false;
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < workers; ++i) {
    helpers.emplace_back([&, workers, i] {
      boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(workers);
      if (i == 1) on_worker1();
      std::unique_lock<boost::fibers::mutex> lock(stop_mu);
      stop_cv.wait(lock, [&] { return stop; });
    });
  }
  boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(workers);
  fn();
  {
    std::lock_guard<boost::fibers::mutex> lock(stop_mu);
    stop = true;
  }
  stop_cv.notify_all();
  for (auto& t : helpers) t.join();
}

template <class F>
void with_workers(unsigned workers, F&& fn) {
  with_workers(workers, std::forward<F>(fn), [] {});
}

int bench_switch(const bench::Args& a) {
  if (a.workers_given && a.workers != 1) bench::usage_error(g_prog, "switch runs on one worker");
  const std::uint64_t half = bench::size_or(a, bench::kSwitchN) / 2;  // yields per fiber
  auto body = [half] {
    for (std::uint64_t i = 0; i < half; ++i) boost::this_fiber::yield();
  };
  const auto t0 = bench::Clock::now();
  boost::fibers::fiber f1(body);
  boost::fibers::fiber f2(body);
  f1.join();
  f2.join();
  const double ns = bench::ns_since(t0);
  bench::result("switch", "-", "ns_per_switch", ns / static_cast<double>(2 * half), "ns");
  return 0;
}

int bench_spawn(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kSpawnN);
  WaitGroup wg;
  double ns = 0;
  with_workers(bench::resolve_workers(a), [&] {
    wg.add(static_cast<std::int64_t>(n));
    const auto t0 = bench::Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) boost::fibers::fiber([&wg] { wg.done(); }).detach();
    wg.wait();
    ns = bench::ns_since(t0);
  });
  const std::string v = bench::variant_of(a);
  bench::result("spawn", v, "ns_per_spawn", ns / static_cast<double>(n), "ns");
  bench::result("spawn", v, "peak_rss", bench::peak_rss_mib(), "MiB");
  return 0;
}

using SkynetChannel = boost::fibers::buffered_channel<std::uint64_t>;

void skynet(SkynetChannel& c, std::uint64_t num, std::uint64_t size, std::uint64_t div) {
  if (size == 1) {
    c.push(num);
    return;
  }
  const std::uint64_t sub = size / div;
  SkynetChannel rc(16);
  for (std::uint64_t i = 0; i < div; ++i) {
    boost::fibers::fiber(boost::fibers::launch::dispatch, skynet, std::ref(rc), num + i * sub, sub,
                         div)
        .detach();
  }
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < div; ++i) sum += rc.value_pop();
  c.push(sum);
}

int bench_skynet(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kSkynetN);
  bench::check_skynet_size(g_prog, n);
  std::uint64_t sum = 0;
  double ns = 0;
  with_workers(bench::resolve_workers(a), [&] {
    const auto t0 = bench::Clock::now();
    // The root is a fiber too, as in Go's `go skynet(c, 0, size, 10); <-c`.
    SkynetChannel c(2);
    boost::fibers::fiber(boost::fibers::launch::dispatch, skynet, std::ref(c), std::uint64_t{0}, n,
                         bench::kSkynetDiv)
        .detach();
    sum = c.value_pop();
    ns = bench::ns_since(t0);
  });
  if (int rc = bench::verify("skynet", sum, bench::skynet_expected(n))) return rc;
  const std::string v = bench::variant_of(a);
  bench::result("skynet", v, "time", ns / 1e6, "ms");
  bench::result("skynet", v, "peak_rss", bench::peak_rss_mib(), "MiB");
  return 0;
}

int bench_park_mem(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kParkN);
  std::vector<std::unique_ptr<Semaphore>> sems;
  WaitGroup started;
  WaitGroup finished;
  double bytes = 0;
  double park_ns = 0;
  with_workers(bench::resolve_workers(a), [&] {
    const std::uint64_t before = bench::current_rss_bytes();
    sems.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) sems.push_back(std::make_unique<Semaphore>());
    started.add(static_cast<std::int64_t>(n));
    finished.add(static_cast<std::int64_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
      boost::fibers::fiber([&started, &finished, sem = sems[i].get()] {
        started.done();
        sem->acquire();
        finished.done();
      }).detach();
    }
    started.wait();
    park_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now() - t0)
                                      .count()) /
              static_cast<double>(n);
    // The last fiber to start is a few instructions from parking; give it time to get there.
    boost::this_fiber::sleep_for(std::chrono::milliseconds(20));
    const std::uint64_t parked = bench::current_rss_bytes();
    for (auto& sem : sems) sem->release();
    finished.wait();
    bytes = (static_cast<double>(parked) - static_cast<double>(before)) / static_cast<double>(n);
  });
  bench::result("park_mem", bench::variant_of(a), "bytes_per_fiber", bytes, "B");
  bench::result("park_mem", bench::variant_of(a), "park_ns", park_ns, "ns");
  return 0;
}

int bench_mutex(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kMutexN);
  const unsigned workers = bench::resolve_workers(a);
  const std::uint64_t fibers = 4ull * workers;
  boost::fibers::mutex mu;
  std::uint64_t counter = 0;
  WaitGroup wg;
  double ns = 0;
  with_workers(workers, [&] {
    wg.add(static_cast<std::int64_t>(fibers));
    const auto t0 = bench::Clock::now();
    for (std::uint64_t f = 0; f < fibers; ++f) {
      const std::uint64_t mine = n / fibers + (f < n % fibers ? 1 : 0);
      boost::fibers::fiber([&mu, &counter, &wg, mine] {
        for (std::uint64_t i = 0; i < mine; ++i) {
          std::lock_guard<boost::fibers::mutex> lock(mu);
          ++counter;
        }
        wg.done();
      }).detach();
    }
    wg.wait();
    ns = bench::ns_since(t0);
  });
  if (int rc = bench::verify("mutex", counter, n)) return rc;
  const std::string v = bench::variant_of(a);
  bench::result("mutex", v, "time", ns / 1e6, "ms");
  bench::result("mutex", v, "ns_per_increment", ns / static_cast<double>(n), "ns");
  return 0;
}

int bench_chan_pingpong(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kChanPingPongN);
  const unsigned workers = bench::resolve_workers(a);
  boost::fibers::unbuffered_channel<std::uint64_t> ping;
  boost::fibers::unbuffered_channel<std::uint64_t> pong;
  std::uint64_t sum = 0;
  double ns = 0;
  auto echo = [&ping, &pong, n] {
    for (std::uint64_t i = 0; i < n; ++i) pong.push(ping.value_pop());
  };
  auto pinger = [&] {
    const auto t0 = bench::Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
      ping.push(i);
      sum += pong.value_pop();
    }
    ns = bench::ns_since(t0);
  };
  if (workers <= 1) {
    with_workers(1, [&] {
      boost::fibers::fiber e(echo);
      pinger();
      e.join();
    });
  } else {
    with_workers(workers, pinger, echo);
  }
  if (int rc = bench::verify("chan_pingpong", sum, bench::sum_below(n))) return rc;
  bench::result("chan_pingpong", bench::variant_of(a), "ns_per_roundtrip",
                ns / static_cast<double>(n), "ns");
  return 0;
}

int bench_chan_mpmc(const bench::Args& a) {
  const std::uint64_t n = bench::size_or(a, bench::kChanMpmcN);
  boost::fibers::buffered_channel<std::uint64_t> ch(bench::kMpmcCapacity);
  std::vector<std::uint64_t> sums(bench::kMpmcConsumers), counts(bench::kMpmcConsumers);
  WaitGroup producers;
  WaitGroup consumers;
  double ns = 0;
  with_workers(bench::resolve_workers(a), [&] {
    producers.add(bench::kMpmcProducers);
    consumers.add(bench::kMpmcConsumers);
    const auto t0 = bench::Clock::now();
    for (unsigned c = 0; c < bench::kMpmcConsumers; ++c) {
      boost::fibers::fiber([&, c] {
        std::uint64_t sum = 0, count = 0, v = 0;
        while (ch.pop(v) == boost::fibers::channel_op_status::success) {
          sum += v;
          ++count;
        }
        sums[c] = sum;
        counts[c] = count;
        consumers.done();
      }).detach();
    }
    for (unsigned p = 0; p < bench::kMpmcProducers; ++p) {
      const std::uint64_t lo = n * p / bench::kMpmcProducers;
      const std::uint64_t hi = n * (p + 1) / bench::kMpmcProducers;
      boost::fibers::fiber([&ch, &producers, lo, hi] {
        for (std::uint64_t i = lo; i < hi; ++i) ch.push(i);
        producers.done();
      }).detach();
    }
    producers.wait();
    ch.close();
    consumers.wait();
    ns = bench::ns_since(t0);
  });
  std::uint64_t sum = 0, count = 0;
  for (unsigned c = 0; c < bench::kMpmcConsumers; ++c) {
    sum += sums[c];
    count += counts[c];
  }
  if (int rc = bench::verify("chan_mpmc", count, n)) return rc;
  if (int rc = bench::verify("chan_mpmc", sum, bench::sum_below(n))) return rc;
  bench::result("chan_mpmc", bench::variant_of(a), "ns_per_item", ns / static_cast<double>(n),
                "ns");
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
  if (a.bench == "chan_pingpong") return bench_chan_pingpong(a);
  if (a.bench == "chan_mpmc") return bench_chan_mpmc(a);
  bench::usage_error(g_prog, "unsupported bench: " + a.bench +
                                 " (boostfiber implements switch, spawn, skynet, park_mem, mutex,"
                                 " chan_pingpong, chan_mpmc)");
}
