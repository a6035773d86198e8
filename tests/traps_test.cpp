// Proves that weft avoids the traps listed in docs/architecture.md ("Traps"), under workers = 1, 2,
// 4 and 8: (1) fibers migrate between kernel threads, and thread-locals read through a non-inlined
// accessor stay consistent with the thread the fiber is on; (2) errno and the C++ "currently
// caught exception" are per fiber: a fiber's value survives switches while other fibers on the same
// workers set errno and throw and catch their own exceptions; (3) racing park/wake pairs across
// workers lose no wake-up: at least 1M semaphore hand-offs between ping-ponging fibers (100k under
// the sanitizers), plus Mutex/CondVar and plain-thread hand-offs, complete with exact counts
// within a time bound; (4) an exception thrown in a fiber reaches join(), also through two joins
// and across workers.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace {

using namespace weft_test;

class TrapsTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(TrapsTest);

// ---- (1) thread-locals across migration ---------------------------------------------------------

// Per-thread record, found only through the opaque accessor below (never cached across a switch).
struct ThreadSlot {
  std::uint64_t generation = 0;
  pid_t owner = 0;
  std::atomic<std::uint64_t>* counter = nullptr;
};
thread_local ThreadSlot tls_slot;

std::atomic<std::uint64_t> g_generation{0};
std::mutex g_counters_mu;
std::vector<std::unique_ptr<std::atomic<std::uint64_t>>> g_counters;  // one per thread per test

WEFT_TEST_OPAQUE pid_t current_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

WEFT_TEST_OPAQUE ThreadSlot* my_slot() {
  ThreadSlot* s = &tls_slot;
  const std::uint64_t gen = g_generation.load(std::memory_order_relaxed);
  if (s->generation != gen) {
    std::lock_guard lock(g_counters_mu);
    g_counters.push_back(std::make_unique<std::atomic<std::uint64_t>>(0));
    s->generation = gen;
    s->owner = current_tid();
    s->counter = g_counters.back().get();
  }
  return s;
}

TEST_P(TrapsTest, MigratingFibersSeeTheirCurrentThreadsLocals) {
  {
    std::lock_guard lock(g_counters_mu);
    g_counters.clear();
  }
  g_generation.fetch_add(1);
  const int kFibers = static_cast<int>(4 * workers());
  const int kIters = static_cast<int>(scaled(4000));
  // With several workers the test needs a migration to prove anything. The scheduler guarantees
  // that queued work reaches idle workers eventually, not within any number of iterations (on a
  // loaded machine one worker may run everything for a while), so the fibers keep going past
  // kIters until some fiber has changed threads, within a generous bound.
  const bool need_migration = workers() > 1;
  struct Result {
    std::uint64_t iterations = 0, migrations = 0, mismatches = 0, id_changes = 0;
  };
  const Result r = weft::run(
      [&] {
        std::atomic<std::uint64_t> iterations{0}, migrations{0}, mismatches{0}, id_changes{0};
        const auto deadline = Clock::now() + 60s;
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < kFibers; ++f) {
          ts.push_back(weft::spawn([&, f] {
            const std::uint64_t my_id = weft::this_fiber::id();
            pid_t last = current_tid();
            for (int i = 0; Clock::now() < deadline; ++i) {
              if (i >= kIters && (!need_migration || migrations.load() > 0)) break;
              ThreadSlot* s = my_slot();
              const pid_t tid = current_tid();
              if (s->owner != tid) ++mismatches;
              s->counter->fetch_add(1, std::memory_order_relaxed);
              ++iterations;
              if (tid != last) ++migrations;
              last = tid;
              if (weft::this_fiber::id() != my_id) ++id_changes;
              // Mix the ways a fiber leaves its worker: yield (stealable from the run queue) and
              // sleep (woken by whichever worker runs the timers, into that worker's queue).
              switch ((i + f) % 8) {
                case 0:
                  weft::this_fiber::sleep_for(std::chrono::microseconds(20));
                  break;
                default:
                  weft::this_fiber::yield();
              }
            }
          }));
        }
        for (auto& t : ts) t.join();
        return Result{iterations.load(), migrations.load(), mismatches.load(), id_changes.load()};
      },
      opts());
  std::uint64_t counted = 0;
  {
    std::lock_guard lock(g_counters_mu);
    for (auto& c : g_counters) counted += c->load();
  }
  EXPECT_EQ(r.mismatches, 0u) << "a thread_local read after a switch belonged to another thread";
  EXPECT_EQ(r.id_changes, 0u);
  EXPECT_EQ(counted, r.iterations) << "per-thread counters lost or double-counted increments";
  EXPECT_GE(r.iterations, static_cast<std::uint64_t>(kFibers) * std::min(kIters, 100));
  if (need_migration) {
    EXPECT_GT(r.migrations, 0u) << "no fiber moved to another worker within 60 s";
  } else {
    EXPECT_EQ(r.migrations, 0u) << "one worker, yet a fiber changed threads";
  }
}

// ---- (2) errno and the caught exception are per fiber -----------------------------------------

WEFT_TEST_OPAQUE int read_errno() { return errno; }
WEFT_TEST_OPAQUE void write_errno(int v) { errno = v; }

TEST_P(TrapsTest, ErrnoSurvivesSwitchesPerFiber) {
  const int kFibers = static_cast<int>(2 * workers() + 2);
  const int kIters = static_cast<int>(scaled(3000));
  const std::uint64_t wrong = weft::run(
      [&] {
        std::atomic<std::uint64_t> wrong{0};
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < kFibers; ++f) {
          ts.push_back(weft::spawn([&, f] {
            const int mine = 10000 + f;
            write_errno(mine);
            for (int i = 0; i < kIters; ++i) {
              if (i % 16 == 0) {
                weft::this_fiber::sleep_for(std::chrono::microseconds(10));
              } else {
                weft::this_fiber::yield();
              }
              if (read_errno() != mine) {
                ++wrong;
                write_errno(mine);
              }
            }
          }));
        }
        // Noise: fibers that keep setting errno to other values on the same workers.
        std::atomic<bool> stop{false};
        std::vector<weft::Task<void>> noise;
        for (int n = 0; n < static_cast<int>(workers()); ++n) {
          noise.push_back(weft::spawn([&, n] {
            for (int i = 0; i < 1000000 && !stop.load(); ++i) {
              write_errno(-1 - n - i % 7);
              weft::this_fiber::yield();
            }
          }));
        }
        for (auto& t : ts) t.join();
        stop = true;
        for (auto& t : noise) t.join();
        return wrong.load();
      },
      opts());
  EXPECT_EQ(wrong, 0u) << "errno changed under a fiber while it was switched out";
}

struct Tagged {
  int tag;
};

TEST_P(TrapsTest, CaughtExceptionSurvivesAParkInsideTheCatchBlock) {
  const int kFibers = static_cast<int>(2 * workers() + 2);
  const int kRounds = static_cast<int>(scaled(200));
  const std::uint64_t wrong = weft::run(
      [&] {
        std::atomic<std::uint64_t> wrong{0};
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < kFibers; ++f) {
          ts.push_back(weft::spawn([&, f] {
            for (int r = 0; r < kRounds; ++r) {
              const int tag = f * 100000 + r;
              try {
                throw Tagged{tag};
              } catch (...) {
                // Park inside the catch block while other fibers throw and catch.
                weft::this_fiber::yield();
                if (r % 4 == 0) weft::this_fiber::sleep_for(std::chrono::microseconds(20));
                weft::this_fiber::yield();
                if (std::uncaught_exceptions() != 0) ++wrong;
                const std::exception_ptr ep = std::current_exception();
                if (!ep) {
                  ++wrong;
                  continue;
                }
                try {
                  std::rethrow_exception(ep);
                } catch (const Tagged& t) {
                  if (t.tag != tag) ++wrong;
                } catch (...) {
                  ++wrong;
                }
                // A bare `throw;` after the park rethrows our own exception too.
                try {
                  throw;
                } catch (const Tagged& t) {
                  if (t.tag != tag) ++wrong;
                } catch (...) {
                  ++wrong;
                }
              }
              // Outside the catch block nothing is "currently caught" any more.
              if (std::current_exception()) ++wrong;
            }
          }));
        }
        // Noise: fibers that throw and catch other exceptions on the same workers.
        std::atomic<bool> stop{false};
        std::vector<weft::Task<void>> noise;
        for (int n = 0; n < static_cast<int>(workers()); ++n) {
          noise.push_back(weft::spawn([&] {
            for (int i = 0; i < 1000000 && !stop.load(); ++i) {
              try {
                throw std::runtime_error("noise");
              } catch (const std::runtime_error& e) {
                weft::this_fiber::yield();
                if (std::string(e.what()) != "noise") ++wrong;
              }
            }
          }));
        }
        for (auto& t : ts) t.join();
        stop = true;
        for (auto& t : noise) t.join();
        return wrong.load();
      },
      opts());
  EXPECT_EQ(wrong, 0u);
}

// ---- (3) racing park/ready across workers -------------------------------------------------------

// Ping-pong pairs through two semaphores. Every hand-off is one acquire that usually parks and one
// release that wakes it, often from another worker. 1M hand-offs in Release and Debug; 100k under
// ASan/TSan, whose per-switch cost would otherwise blow the CI budget.
TEST_P(TrapsTest, MillionSemaphoreHandoffsLoseNoWakeup) {
  const std::int64_t kHandoffs = kSanitized ? 100000 : 1000000;
  const int kPairs = 8;
  const std::int64_t kRounds = kHandoffs / (2 * kPairs);  // each round: two hand-offs
  struct Pair {
    weft::Semaphore ping{0}, pong{0};
    std::atomic<std::int64_t> ping_rounds{0}, pong_rounds{0};
  };
  std::vector<std::unique_ptr<Pair>> pairs;  // outlive run(): shutdown may unwind waiters
  for (int p = 0; p < kPairs; ++p) pairs.push_back(std::make_unique<Pair>());
  struct Result {
    bool completed = false;
    double ms = 0;
    std::uint64_t parks = 0;
  };
  const Result r = weft::run(
      [&] {
        Result r;
        const auto t0 = Clock::now();
        const std::uint64_t parks0 = weft::stats().parks;
        std::atomic<int> finished{0};
        for (auto& pp : pairs) {
          Pair* p = pp.get();
          weft::go([p, &finished, kRounds] {
            for (std::int64_t i = 0; i < kRounds; ++i) {
              p->pong.release();
              p->ping.acquire();
              p->ping_rounds.fetch_add(1, std::memory_order_relaxed);
              if (i % 97 == 0) weft::this_fiber::yield();  // lets pairs spread over workers
            }
            ++finished;
          });
          weft::go([p, &finished, kRounds] {
            for (std::int64_t i = 0; i < kRounds; ++i) {
              p->pong.acquire();
              p->pong_rounds.fetch_add(1, std::memory_order_relaxed);
              p->ping.release();
            }
            ++finished;
          });
        }
        // Bounded wait: fail (and let shutdown unwind the stuck fibers) if progress stops.
        std::int64_t last_progress = -1;
        auto last_change = Clock::now();
        while (finished.load() < 2 * kPairs) {
          weft::this_fiber::sleep_for(5ms);
          std::int64_t progress = 0;
          for (auto& p : pairs) progress += p->ping_rounds.load() + p->pong_rounds.load();
          if (progress != last_progress) {
            last_progress = progress;
            last_change = Clock::now();
          } else if (Clock::now() - last_change > 10s) {
            ADD_FAILURE() << "no progress for 10 s: a wake-up was lost (" << progress << " of "
                          << 2 * kRounds * kPairs << " rounds done)";
            return r;
          }
          if (Clock::now() - t0 > 100s) {
            ADD_FAILURE() << "too slow: " << progress << " rounds in 100 s";
            return r;
          }
        }
        r.completed = true;
        r.ms = ms_since(t0);
        r.parks = weft::stats().parks - parks0;
        return r;
      },
      opts());
  ASSERT_TRUE(r.completed);
  for (auto& p : pairs) {
    EXPECT_EQ(p->ping_rounds.load(), kRounds);
    EXPECT_EQ(p->pong_rounds.load(), kRounds);
    EXPECT_EQ(p->ping.available(), 0);
    EXPECT_EQ(p->pong.available(), 0);
  }
  EXPECT_GT(r.parks, 0u);
  std::printf("[ info ] %lld hand-offs in %.0f ms, %llu parks\n",
              static_cast<long long>(2 * kRounds * kPairs), r.ms,
              static_cast<unsigned long long>(r.parks));
}

// A ping-pong pair settles on one worker (the woken fiber runs next on its waker's worker), so the
// test above mostly races park and wake on one thread. Here a coordinator wakes a whole crew at
// once (fan-out): all but the last woken land in the run queue, idle workers steal them, and their
// acknowledgements (fan-in) wake the coordinator from other workers, often while it is still on
// its way into the park; the crew, in turn, is woken from the coordinator's worker. Exact counts;
// cross-thread wake-ups are counted and must happen with 2+ workers.
TEST_P(TrapsTest, FanOutFanInWakesAcrossWorkers) {
  const std::int64_t kHandoffs = scaled(200000);
  const int kCrew = 16;
  const std::int64_t kRounds = kHandoffs / (2 * kCrew);
  // With several workers the test needs a cross-thread wake-up to prove anything. Idle workers
  // steal the woken crew eventually, not within any number of rounds (on a loaded machine one
  // worker may run everything for a while), so the coordinator keeps going past kRounds until
  // some fiber has resumed on another thread, within a generous bound.
  const bool need_move = workers() > 1;
  std::vector<std::unique_ptr<weft::Semaphore>> go_sems;  // outlive run(), like the ping-pong's
  for (int i = 0; i < kCrew; ++i) go_sems.push_back(std::make_unique<weft::Semaphore>(0));
  weft::Semaphore done(0);
  std::vector<std::atomic<std::int64_t>> rounds(kCrew);
  std::atomic<std::int64_t> moved{0};  // resumed on another thread than the one it parked on
  std::atomic<bool> stop{false};       // set before the crew's last wake-up: leave, don't ack
  struct Result {
    bool completed = false;
    double ms = 0;
    std::int64_t rounds = 0;
  };
  const Result r = weft::run(
      [&] {
        Result r;
        const auto t0 = Clock::now();
        const auto deadline = t0 + 60s;
        weft::WaitGroup crew_left;
        crew_left.add(kCrew);
        for (int i = 0; i < kCrew; ++i) {
          weft::go([&, i] {
            for (;;) {
              const pid_t before = current_tid();
              go_sems[i]->acquire();
              if (current_tid() != before) moved.fetch_add(1, std::memory_order_relaxed);
              if (stop.load()) break;
              rounds[i].fetch_add(1, std::memory_order_relaxed);
              done.release();
            }
            crew_left.done();
          });
        }
        std::int64_t k = 0;
        for (; k < kRounds || (need_move && moved.load() == 0); ++k) {
          if (Clock::now() > deadline) {
            ADD_FAILURE() << "too slow: " << k << " rounds (" << kRounds << " wanted, "
                          << moved.load() << " cross-thread wake-ups) in 60 s";
            break;
          }
          for (auto& g : go_sems) g->release();
          for (int i = 0; i < kCrew; ++i) {
            const pid_t before = current_tid();
            done.acquire();
            if (current_tid() != before) moved.fetch_add(1, std::memory_order_relaxed);
          }
        }
        stop = true;
        for (auto& g : go_sems) g->release();
        crew_left.wait();
        r.completed = k >= kRounds;
        r.rounds = k;
        r.ms = ms_since(t0);
        return r;
      },
      opts());
  ASSERT_TRUE(r.completed);
  for (int i = 0; i < kCrew; ++i) {
    EXPECT_EQ(rounds[i].load(), r.rounds) << "crew fiber " << i;
    EXPECT_EQ(go_sems[i]->available(), 0);
  }
  EXPECT_EQ(done.available(), 0);
  if (need_move) {
    EXPECT_GT(moved.load(), 0) << "no fiber was woken onto another worker within 60 s";
  } else {
    EXPECT_EQ(moved.load(), 0) << "one worker, yet a fiber resumed on another thread";
  }
  std::printf("[ info ] %lld fan-out/fan-in hand-offs in %.0f ms, %lld resumed on another thread\n",
              static_cast<long long>(2 * r.rounds * kCrew), r.ms,
              static_cast<long long>(moved.load()));
}

TEST_P(TrapsTest, MutexCondVarHandshakesLoseNoWakeup) {
  const std::int64_t kRounds = scaled(20000);
  const int kPairs = 4;
  struct Channel {
    weft::Mutex mu;
    weft::CondVar cv;
    std::int64_t turn = 0;  // even: ping's move, odd: pong's
  };
  std::vector<std::unique_ptr<Channel>> chans;
  for (int i = 0; i < kPairs; ++i) chans.push_back(std::make_unique<Channel>());
  const std::int64_t total = weft::run(
      [&] {
        std::atomic<std::int64_t> moves{0};
        std::vector<weft::Task<void>> ts;
        for (auto& cp : chans) {
          Channel* c = cp.get();
          for (int side = 0; side < 2; ++side) {
            ts.push_back(weft::spawn([c, side, &moves, kRounds] {
              for (std::int64_t i = 0; i < kRounds; ++i) {
                std::unique_lock lock(c->mu);
                const bool ok = c->cv.wait_for(lock, 30s, [&] { return c->turn % 2 == side; });
                if (!ok) {
                  ADD_FAILURE() << "hand-off stalled for 30 s at turn " << c->turn;
                  return;
                }
                ++c->turn;
                ++moves;
                c->cv.notify_one();
              }
            }));
          }
        }
        for (auto& t : ts) t.join();
        return moves.load();
      },
      opts());
  EXPECT_EQ(total, 2 * kRounds * kPairs);
  for (auto& c : chans) EXPECT_EQ(c->turn, 2 * kRounds);
}

TEST_P(TrapsTest, PlainThreadWakesRaceWithFiberParks) {
  // Wakes from outside the workers go through the global queue and wake sleeping workers.
  const std::int64_t kRounds = scaled(20000);
  const int kThreads = 2;
  std::vector<std::unique_ptr<weft::Semaphore>> to_fiber, to_thread;
  for (int i = 0; i < kThreads; ++i) {
    to_fiber.push_back(std::make_unique<weft::Semaphore>(0));
    to_thread.push_back(std::make_unique<weft::Semaphore>(0));
  }
  std::atomic<std::int64_t> fiber_rounds{0}, thread_rounds{0};
  weft::run(
      [&] {
        std::vector<std::thread> threads;
        for (int k = 0; k < kThreads; ++k) {
          threads.emplace_back([&, k] {
            for (std::int64_t i = 0; i < kRounds; ++i) {
              to_fiber[k]->release();
              to_thread[k]->acquire();
              ++thread_rounds;
            }
          });
        }
        std::vector<weft::Task<void>> ts;
        for (int k = 0; k < kThreads; ++k) {
          ts.push_back(weft::spawn([&, k] {
            for (std::int64_t i = 0; i < kRounds; ++i) {
              to_fiber[k]->acquire();
              ++fiber_rounds;
              to_thread[k]->release();
            }
          }));
        }
        for (auto& t : ts) t.join();
        weft::blocking([&] {
          for (auto& t : threads) t.join();
        });
      },
      opts());
  EXPECT_EQ(fiber_rounds.load(), kRounds * kThreads);
  EXPECT_EQ(thread_rounds.load(), kRounds * kThreads);
}

// ---- (4) exceptions through join ---------------------------------------------------------------

struct PayloadError : std::exception {
  explicit PayloadError(std::vector<int> v) : values(std::move(v)) {}
  const char* what() const noexcept override { return "payload"; }
  std::vector<int> values;
};

TEST_P(TrapsTest, ExceptionIsCarriedThroughJoin) {
  weft::run(
      [] {
        // Thrown after the fiber parked (maybe on another worker), caught by join's caller.
        auto t = weft::spawn([]() -> int {
          weft::this_fiber::sleep_for(1ms);
          weft::this_fiber::yield();
          throw PayloadError({1, 2, 3});
        });
        try {
          t.join();
          ADD_FAILURE() << "join did not rethrow";
        } catch (const PayloadError& e) {
          EXPECT_EQ(e.values, (std::vector<int>{1, 2, 3}));
        }
        // Through two joins: the inner task's exception escapes the outer task's join.
        auto outer = weft::spawn([] {
          auto inner = weft::spawn([]() -> std::string {
            weft::this_fiber::yield();
            throw std::out_of_range("inner");
          });
          return inner.join() + " never";
        });
        try {
          outer.join();
          ADD_FAILURE() << "join did not rethrow";
        } catch (const std::out_of_range& e) {
          EXPECT_STREQ(e.what(), "inner");
        }
        // Not derived from std::exception, and void tasks.
        auto v = weft::spawn([] { throw 42; });
        try {
          v.join();
          ADD_FAILURE() << "join did not rethrow";
        } catch (int x) {
          EXPECT_EQ(x, 42);
        }
        // Many at once, joined in reverse order.
        std::vector<weft::Task<int>> ts;
        for (int i = 0; i < 32; ++i) {
          ts.push_back(weft::spawn([i]() -> int {
            if (i % 2) weft::this_fiber::yield();
            if (i % 3 == 0) throw std::runtime_error(std::to_string(i));
            return i;
          }));
        }
        for (int i = 31; i >= 0; --i) {
          if (i % 3 == 0) {
            try {
              ts[i].join();
              ADD_FAILURE() << "task " << i << " should have thrown";
            } catch (const std::runtime_error& e) {
              EXPECT_EQ(std::string(e.what()), std::to_string(i));
            }
          } else {
            EXPECT_EQ(ts[i].join(), i);
          }
        }
      },
      opts());
}

}  // namespace
