// A randomised model test of Chan and select under workers = 1, 2, 4 and 8. In each round, fibers
// run random sequences of send, recv, try_send, try_recv, close, select (sends, receives, nil
// cases, default, timeouts) and yield over a few fresh channels, buffered and unbuffered; when
// every fiber is blocked the main fiber closes a channel, and at the end it closes the rest and
// drains them. Values are move-only, instance-counted tokens tagged (sender, channel, sequence).
// The invariants of a sequential model are then checked:
//  - no value is received twice, and each on the channel it was sent to;
//  - the values that were sent (send returned, try_send true, a select's send case fired) and
//    never received are exactly those drained at the end: nothing is lost, by close included;
//  - a value whose send threw ChannelClosed (closed before or while blocked), or that was never
//    sent (a failed try_send, a losing or throwing select case), is never received nor buffered;
//  - per receiver and channel, each sender's values arrive in increasing sequence (FIFO per
//    sender), and so do the drained leftovers;
//  - every token is destroyed exactly once, also for fibers still blocked when a last round lets
//    run()'s shutdown unwind them.
// The seed is fixed per worker count and printed; WEFT_CHAN_MODEL_SEED=<n> overrides it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "chan_test_util.hpp"
#include "test_util.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;
using weft::Chan;

class ChanModelTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(ChanModelTest);

constexpr int kChans = 5;
constexpr int kFibers = 8;

// tag = sender << 48 | channel << 40 | seq
constexpr std::int64_t make_tag(int sender, int chan, std::int64_t seq) {
  return (static_cast<std::int64_t>(sender) << 48) | (static_cast<std::int64_t>(chan) << 40) | seq;
}
constexpr int tag_sender(std::int64_t t) { return static_cast<int>(t >> 48); }
constexpr int tag_chan(std::int64_t t) { return static_cast<int>((t >> 40) & 0xFF); }
constexpr std::int64_t tag_seq(std::int64_t t) { return t & ((std::int64_t{1} << 40) - 1); }

struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  std::uint64_t next() {
    // splitmix64
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

struct Received {
  int chan;
  std::int64_t tag;
};

// What one fiber did in a round. Written by that fiber only; read by main after it finished.
struct Log {
  std::vector<std::int64_t> sent;         // handed over: must be received or drained
  std::vector<std::int64_t> send_closed;  // send threw ChannelClosed: must vanish
  std::vector<std::int64_t> unsent;       // never handed over: must vanish
  std::vector<Received> received;         // in order
  int blocked_send_closed = 0;            // of send_closed: threw after blocking
};

struct Shared {
  std::vector<Chan<Tracked>> ch;  // kChans, plus a nil one at index kChans
  std::atomic<bool> closed[kChans] = {};
  std::atomic<std::uint64_t> progress{0};
  std::atomic<int> finished{0};
};

// One fiber's random walk.
void fiber_ops(Shared& sh, Log& log, int me, std::uint64_t seed, int ops) {
  Rng rng(seed);
  std::vector<std::int64_t> seq(kChans + 1, 0);
  auto fresh = [&](int c) { return make_tag(me, c, seq[c]++); };
  auto on_recv = [&](int c, std::optional<Tracked>& v) {
    if (v) log.received.push_back({c, v->id});
  };
  for (int op = 0; op < ops; ++op) {
    const int c = rng.below(kChans);
    const Chan<Tracked>& ch = sh.ch[c];
    const int kind = rng.below(1000);
    try {
      if (kind < 220) {  // blocking send
        const std::int64_t t = fresh(c);
        const bool was_open = !sh.closed[c].load();
        try {
          ch.send(Tracked(t));
          log.sent.push_back(t);
        } catch (const weft::ChannelClosed&) {
          log.send_closed.push_back(t);
          // Open when it started: most likely it blocked and close() woke it.
          if (was_open) ++log.blocked_send_closed;
          throw;
        }
      } else if (kind < 420) {  // blocking recv
        auto v = ch.recv();
        on_recv(c, v);
      } else if (kind < 550) {  // try_send
        const std::int64_t t = fresh(c);
        Tracked v(t);
        bool ok = false;
        try {
          ok = ch.try_send(std::move(v));
        } catch (const weft::ChannelClosed&) {
          log.send_closed.push_back(t);
          throw;
        }
        if (ok) {
          log.sent.push_back(t);
        } else {
          EXPECT_EQ(v.id, t) << "a failed try_send consumed its value";
          log.unsent.push_back(t);
        }
      } else if (kind < 680) {  // try_recv
        auto v = ch.try_recv();
        on_recv(c, v);
      } else if (kind < 970) {  // select over 1-3 channel cases (+ nil, default, timeout)
        const int n = 1 + rng.below(3);
        int ci[3];
        bool is_send[3];
        std::int64_t tags[3] = {-1, -1, -1};
        for (int i = 0; i < 3; ++i) {
          ci[i] = rng.below(kChans);
          is_send[i] = rng.below(2) == 0;
          if (i < n && is_send[i]) tags[i] = fresh(ci[i]);
        }
        const int extra = rng.below(4);  // 0: none, 1: default, 2: timeout, 3: nil + timeout
        const auto timeout = std::chrono::microseconds(rng.below(400));
        std::optional<Tracked> got;
        int got_chan = -1;
        auto recv_into = [&](int k) {
          return [&, k](std::optional<Tracked> v) {
            got = std::move(v);
            got_chan = ci[k];
          };
        };
        const Chan<Tracked>& nil = sh.ch[kChans];
        // Three channel cases: unused ones (i >= n) get the nil channel, so they never fire.
        auto chan_of = [&](int i) -> const Chan<Tracked>& { return i < n ? sh.ch[ci[i]] : nil; };
        std::size_t idx = 99;
        bool threw = false;
        try {
          auto c0s = weft::case_send(is_send[0] ? chan_of(0) : nil, Tracked(tags[0]));
          auto c0r = weft::case_recv(!is_send[0] ? chan_of(0) : nil, recv_into(0));
          auto c1s = weft::case_send(is_send[1] ? chan_of(1) : nil, Tracked(tags[1]));
          auto c1r = weft::case_recv(!is_send[1] ? chan_of(1) : nil, recv_into(1));
          auto c2s = weft::case_send(is_send[2] ? chan_of(2) : nil, Tracked(tags[2]));
          auto c2r = weft::case_recv(!is_send[2] ? chan_of(2) : nil, recv_into(2));
          switch (extra) {
            case 0:
              idx = weft::select(std::move(c0s), std::move(c0r), std::move(c1s), std::move(c1r),
                                 std::move(c2s), std::move(c2r));
              break;
            case 1:
              idx = weft::select(std::move(c0s), std::move(c0r), std::move(c1s), std::move(c1r),
                                 std::move(c2s), std::move(c2r), weft::case_default());
              break;
            default:
              idx = weft::select(std::move(c0s), std::move(c0r), std::move(c1s), std::move(c1r),
                                 std::move(c2s), std::move(c2r), weft::case_timeout(timeout),
                                 weft::case_recv(nil));
              break;
          }
        } catch (const weft::ChannelClosed&) {
          threw = true;
        }
        for (int i = 0; i < n; ++i) {
          if (!is_send[i]) continue;
          // Case positions: send case of channel slot i is 2 * i.
          if (!threw && idx == static_cast<std::size_t>(2 * i)) {
            log.sent.push_back(tags[i]);
          } else {
            log.unsent.push_back(tags[i]);
          }
        }
        if (!threw && idx < 6 && idx % 2 == 1) {
          EXPECT_EQ(got_chan, ci[idx / 2]);
          if (got) log.received.push_back({got_chan, got->id});
        } else {
          EXPECT_FALSE(got.has_value()) << "a receive handler ran for a case that did not fire";
        }
        if (threw) throw weft::ChannelClosed("select");
      } else if (kind < 972 && rng.below(8) == 0) {  // rare: ~0.6 closes per round
        ch.close();
        sh.closed[c] = true;
      } else {
        weft::this_fiber::yield();
      }
    } catch (const weft::ChannelClosed&) {
      // send / try_send / select send on a closed channel, or close of a closed one: expected.
    }
    sh.progress.fetch_add(1, std::memory_order_relaxed);
  }
}

struct ModelStats {
  std::uint64_t sent = 0, received = 0, drained = 0, send_closed = 0, blocked_send_closed = 0,
                unsent = 0, stall_closes = 0, unsticks = 0;
};

// Runs one round on fresh channels; verifies it unless `abandon` (then returns with fibers still
// running or blocked, for shutdown to unwind).
void run_round(std::uint64_t seed, int round_no, int ops, bool abandon, ModelStats& st) {
  Rng rng(seed ^ (0xABCDull * static_cast<std::uint64_t>(round_no + 1)));
  auto sh = std::make_shared<Shared>();
  static const int kCaps[] = {0, 0, 1, 2, 3, 8};
  for (int c = 0; c < kChans; ++c) sh->ch.emplace_back(kCaps[rng.below(6)]);
  sh->ch.emplace_back(nullptr);
  auto logs = std::make_shared<std::vector<Log>>(kFibers + 1);  // + main
  for (int f = 0; f < kFibers; ++f) {
    const std::uint64_t fs = rng.next();
    weft::go([sh, logs, f, fs, ops] {
      fiber_ops(*sh, (*logs)[f], f, fs, ops);
      sh->finished.fetch_add(1);
    });
  }
  if (abandon) {
    weft::this_fiber::sleep_for(std::chrono::microseconds(300));
    return;
  }
  // Whenever nothing moved for a while (every fiber blocked), main unsticks them: it takes part
  // with try_recv / try_send on every channel (as sender kFibers), and now and then closes one.
  Log& mine = (*logs)[kFibers];
  std::vector<std::int64_t> main_seq(kChans, 0);
  std::uint64_t last = ~0ull;
  int quiet = 0;
  const auto give_up = Clock::now() + 60s;
  while (sh->finished.load() < kFibers && Clock::now() < give_up) {
    weft::this_fiber::sleep_for(200us);
    const std::uint64_t p = sh->progress.load();
    if (p != last) {
      last = p;
      quiet = 0;
      continue;
    }
    if (++quiet < 2) continue;
    quiet = 0;
    const int start = rng.below(kChans);
    if (rng.below(10) == 0) {
      for (int k = 0; k < kChans; ++k) {
        const int c = (start + k) % kChans;
        try {
          sh->ch[c].close();
          sh->closed[c] = true;
          ++st.stall_closes;
          break;
        } catch (const weft::ChannelClosed&) {
        }
      }
      continue;
    }
    for (int k = 0; k < kChans; ++k) {
      const int c = (start + k) % kChans;
      if (auto v = sh->ch[c].try_recv()) {
        mine.received.push_back({c, v->id});
        continue;
      }
      const std::int64_t t = make_tag(kFibers, c, main_seq[c]++);
      try {
        if (sh->ch[c].try_send(Tracked(t))) {
          mine.sent.push_back(t);
        } else {
          mine.unsent.push_back(t);
        }
      } catch (const weft::ChannelClosed&) {
        mine.send_closed.push_back(t);
      }
    }
    ++st.unsticks;
  }
  ASSERT_EQ(sh->finished.load(), kFibers) << "round " << round_no << " did not finish";
  // Close the rest and drain.
  std::vector<Received> left;
  for (int c = 0; c < kChans; ++c) {
    try {
      sh->ch[c].close();
    } catch (const weft::ChannelClosed&) {
    }
    for (Tracked& v : sh->ch[c]) left.push_back({c, v.id});
    EXPECT_EQ(sh->ch[c].size(), 0u);
  }

  // ---- the model's invariants
  std::vector<std::int64_t> sent, gone, arrived;  // gone: must never show up
  for (auto& l : *logs) {
    sent.insert(sent.end(), l.sent.begin(), l.sent.end());
    gone.insert(gone.end(), l.send_closed.begin(), l.send_closed.end());
    gone.insert(gone.end(), l.unsent.begin(), l.unsent.end());
    st.send_closed += l.send_closed.size();
    st.blocked_send_closed += static_cast<std::uint64_t>(l.blocked_send_closed);
    st.unsent += l.unsent.size();
    for (auto& r : l.received) {
      arrived.push_back(r.tag);
      EXPECT_EQ(tag_chan(r.tag), r.chan) << "value received on another channel";
    }
    st.received += l.received.size();
  }
  for (auto& r : left) {
    arrived.push_back(r.tag);
    EXPECT_EQ(tag_chan(r.tag), r.chan) << "value drained from another channel";
  }
  st.sent += sent.size();
  st.drained += left.size();
  std::sort(sent.begin(), sent.end());
  std::sort(gone.begin(), gone.end());
  std::sort(arrived.begin(), arrived.end());
  const auto dup = std::adjacent_find(arrived.begin(), arrived.end());
  EXPECT_TRUE(dup == arrived.end())
      << "round " << round_no << ": value " << std::hex << *dup << " received twice";
  EXPECT_TRUE(std::adjacent_find(sent.begin(), sent.end()) == sent.end());
  // Received + drained == sent, exactly.
  std::vector<std::int64_t> lost, phantom;
  std::set_difference(sent.begin(), sent.end(), arrived.begin(), arrived.end(),
                      std::back_inserter(lost));
  std::set_difference(arrived.begin(), arrived.end(), sent.begin(), sent.end(),
                      std::back_inserter(phantom));
  EXPECT_TRUE(lost.empty()) << "round " << round_no << ": " << lost.size()
                            << " sent values were neither received nor left in a buffer (first "
                            << std::hex << (lost.empty() ? 0 : lost[0]) << ")";
  EXPECT_TRUE(phantom.empty()) << "round " << round_no << ": " << phantom.size()
                               << " values arrived that were never sent (first " << std::hex
                               << (phantom.empty() ? 0 : phantom[0]) << ")";
  std::vector<std::int64_t> resurrected;
  std::set_intersection(gone.begin(), gone.end(), arrived.begin(), arrived.end(),
                        std::back_inserter(resurrected));
  EXPECT_TRUE(resurrected.empty())
      << "round " << round_no << ": " << resurrected.size()
      << " values whose send failed or threw ChannelClosed were delivered";
  // FIFO per sender, per receiver and channel; and in the drained leftovers.
  auto check_fifo = [&](const std::vector<Received>& seqv, const char* who) {
    std::vector<std::int64_t> last(static_cast<std::size_t>((kFibers + 1) * kChans), -1);
    for (auto& r : seqv) {
      auto& l = last[static_cast<std::size_t>(tag_sender(r.tag) * kChans + r.chan)];
      EXPECT_GT(tag_seq(r.tag), l)
          << "round " << round_no << ": " << who << " got sender " << tag_sender(r.tag)
          << "'s values out of order on channel " << r.chan;
      l = tag_seq(r.tag);
    }
  };
  for (auto& l : *logs) check_fifo(l.received, "a receiver");
  check_fifo(left, "the drain");
}

TEST_P(ChanModelTest, RandomOpsAgreeWithTheSequentialModel) {
  std::uint64_t seed = 0x5EED0000u + workers();
  if (const char* s = std::getenv("WEFT_CHAN_MODEL_SEED")) seed = std::strtoull(s, nullptr, 0);
  std::printf("chan_model: workers=%u seed=%" PRIu64 " (WEFT_CHAN_MODEL_SEED=%" PRIu64
              " to rerun)\n",
              workers(), seed, seed);
  RecordProperty("seed", std::to_string(seed));
  const int kRounds = static_cast<int>(scaled(25, 3));
  const int kOps = 300;
  Tracked::reset();
  ModelStats st;
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        for (int r = 0; r < kRounds && !::testing::Test::HasFailure(); ++r) {
          run_round(seed, r, kOps, /*abandon=*/false, st);
          EXPECT_EQ(Tracked::live.load(), 0) << "round " << r << ": tokens leaked";
        }
        // A last round left running: shutdown unwinds its fibers, blocked or not.
        run_round(seed, kRounds, kOps, /*abandon=*/true, st);
      },
      opts());
  EXPECT_EQ(Tracked::live.load(), 0) << "tokens leaked by shutdown";
  EXPECT_EQ(Tracked::double_destroyed.load(), 0) << "a token was destroyed twice";
  std::printf("chan_model: %d rounds in %.0f ms: sent %" PRIu64 ", received %" PRIu64
              ", drained %" PRIu64 ", send threw ChannelClosed %" PRIu64 " (%" PRIu64
              " of them blocked first, probably), not sent %" PRIu64
              ", stalls resolved by main %" PRIu64 " and by close %" PRIu64 "\n",
              kRounds, ms_since(t0), st.sent, st.received, st.drained, st.send_closed,
              st.blocked_send_closed, st.unsent, st.unsticks, st.stall_closes);
  // The mix must really exercise the paths it claims to.
  EXPECT_GT(st.received, 0u);
  EXPECT_GT(st.drained, 0u);
  EXPECT_GT(st.send_closed, 0u);
}

}  // namespace
