// Proves weft::select's fairness among ready cases, under workers = 1, 2, 4 and 8: a chi-square
// test over ready cases (also the same channel twice), Go's TestSelectFairness and
// TestPseudoRandomSend, and a parked select with duplicate cases being fair to late peers.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "chan_test_util.hpp"
#include "test_util.hpp"
#include "weft/select.hpp"
#include "weft/weft.hpp"
namespace {

using namespace weft_test;
using weft::case_default;
using weft::case_recv;
using weft::case_send;
using weft::case_timeout;
using weft::Chan;
using weft::select;

class SelectTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(SelectTest);
// ---- fairness
// ------------------------------------------------------------------------------------

// Chi-square of `counts` against equal expectation; with the critical value for p = 1e-9 the
// test flakes about once in a billion runs, yet a real bias of a few percent fails it.
void expect_uniform(const std::vector<int>& counts, const char* what) {
  static const double kCritical[] = {0, 37.3, 41.5, 44.8, 47.9, 50.7, 53.3, 55.9};
  double total = 0;
  for (int c : counts) total += c;
  const double expect = total / static_cast<double>(counts.size());
  double chi2 = 0;
  for (int c : counts) {
    chi2 += (c - expect) * (c - expect) / expect;
    EXPECT_GT(c, expect * 0.75) << what;
    EXPECT_LT(c, expect * 1.25) << what;
  }
  std::string list;
  for (int c : counts) list += std::to_string(c) + " ";
  EXPECT_LT(chi2, kCritical[counts.size() - 1]) << what << ": counts " << list;
}

TEST_P(SelectTest, FairAmongReadyCasesIncludingADuplicateChannel) {
  const int kTrials = 12000;
  weft::run(
      [&] {
        // Run on a fiber that may migrate between workers meanwhile.
        auto t = weft::spawn([&] {
          Chan<int> c1(4), c2(4), c3(4), never;
          Chan<int> nil = nullptr;
          c1.send(1);
          c2.send(2);
          std::vector<int> counts(7, 0);
          for (int i = 0; i < kTrials; ++i) {
            const std::size_t k =
                select(case_recv(c1), case_recv(c1), case_recv(never), case_recv(c2),
                       case_send(c3, 3), case_recv(nil), case_send(nil, 0));
            ++counts[k];
            if (k <= 1) c1.send(1);
            if (k == 3) c2.send(2);
            if (k == 4) (void)c3.recv();
            if (i % 1000 == 0) weft::this_fiber::yield();
          }
          EXPECT_EQ(counts[2] + counts[5] + counts[6], 0) << "a case that was never ready fired";
          expect_uniform({counts[0], counts[1], counts[3], counts[4]}, "ready cases");
          // Two closed channels are both always ready.
          Chan<int> x, y;
          x.close();
          y.close();
          std::vector<int> closed(2, 0);
          for (int i = 0; i < kTrials / 2; ++i) ++closed[select(case_recv(x), case_recv(y))];
          expect_uniform(closed, "closed channels");
          // case_default is never chosen while another case is ready.
          int defaults = 0;
          for (int i = 0; i < 1000; ++i) {
            if (select(case_default(), case_recv(x)) == 0) ++defaults;
          }
          EXPECT_EQ(defaults, 0);
        });
        t.join();
      },
      opts());
}

// Go's TestSelectFairness: two always-ready buffered channels and two never-ready ones, with the
// choice going through a second select to the consumer.
TEST_P(SelectTest, GoSelectFairness) {
  const int kTrials = 10000;
  weft::run(
      [&] {
        Chan<char> c1(kTrials + 1), c2(kTrials + 1), c3, c4, out, done;
        for (int i = 0; i < kTrials + 1; ++i) {
          c1.send(1);
          c2.send(2);
        }
        weft::WaitGroup wg;
        wg.add(1);
        weft::go([&] {
          for (;;) {
            char b = 0;
            auto take = [&](std::optional<char> v) { b = *v; };
            select(case_recv(c3, take), case_recv(c4, take), case_recv(c1, take),
                   case_recv(c2, take));
            bool stop = false;
            select(case_send(out, b), case_recv(done, [&] { stop = true; }));
            if (stop) break;
          }
          wg.done();
        });
        int cnt1 = 0, cnt2 = 0, other = 0;
        for (int i = 0; i < kTrials; ++i) {
          switch (*out.recv()) {
            case 1:
              ++cnt1;
              break;
            case 2:
              ++cnt2;
              break;
            default:
              ++other;
          }
        }
        EXPECT_EQ(other, 0);
        // Go allows 10 sigma; we use chi-square too.
        const double sigma = std::sqrt(kTrials * 0.25);
        EXPECT_LT(std::abs(cnt1 - kTrials / 2), 10 * sigma) << cnt1 << " vs " << cnt2;
        expect_uniform({cnt1, cnt2}, "TestSelectFairness");
        done.close();
        wg.wait();
      },
      opts());
}

// Go's TestPseudoRandomSend: a select with two send cases on one channel sends each value about
// half of the time, also when it parks and the receiver comes later.
TEST_P(SelectTest, GoPseudoRandomSend) {
  const int kN = 100;
  weft::run(
      [&] {
        for (int cap : {0, kN}) {
          Chan<int> c(cap);
          auto r = weft::spawn([&] {
            std::vector<int> l(kN);
            for (int i = 0; i < kN; ++i) {
              weft::this_fiber::yield();
              l[i] = *c.recv();
            }
            return l;
          });
          for (int i = 0; i < kN; ++i) select(case_send(c, 1), case_send(c, 0));
          const auto l = r.join();
          const int n1 = static_cast<int>(std::count(l.begin(), l.end(), 1));
          const int n0 = kN - n1;
          EXPECT_GT(n0, kN / 10) << "want pseudorandom, got " << n0 << " zeros and " << n1
                                 << " ones (chan cap " << cap << ")";
          EXPECT_GT(n1, kN / 10) << "want pseudorandom, got " << n0 << " zeros and " << n1
                                 << " ones (chan cap " << cap << ")";
        }
      },
      opts());
}

// The same with the receiver always arriving after the select parked: a peer that completes a
// parked select must not always pick its lowest-index case on that channel.
TEST_P(SelectTest, ParkedSelectWithDuplicateCasesIsFairToLatePeers) {
  const int kN = 1000;
  weft::run(
      [&] {
        Chan<int> c;
        Chan<int> parked_signal(1);
        auto r = weft::spawn([&] {
          int ones = 0;
          for (int i = 0; i < kN; ++i) {
            (void)parked_signal.recv();
            weft::this_fiber::sleep_for(20us);  // let the select park first
            if (*c.recv() == 1) ++ones;
          }
          return ones;
        });
        for (int i = 0; i < kN; ++i) {
          parked_signal.send(0);
          select(case_send(c, 1), case_send(c, 0));
        }
        const int ones = r.join();
        expect_uniform({ones, kN - ones}, "parked duplicate send cases");

        // And receive cases: which of two parked cases on one channel a late sender completes.
        auto s = weft::spawn([&] {
          for (int i = 0; i < kN; ++i) {
            (void)parked_signal.recv();
            weft::this_fiber::sleep_for(20us);
            c.send(i);
          }
        });
        std::vector<int> counts(2, 0);
        for (int i = 0; i < kN; ++i) {
          parked_signal.send(0);
          ++counts[select(case_recv(c), case_recv(c))];
        }
        s.join();
        expect_uniform(counts, "parked duplicate receive cases");
      },
      opts());
}
}  // namespace
