// The list of grown channel rings (channels/src/grown_rings.hpp), driven directly: a ring that
// grows to kListedRingBytes is listed; the returner frees the rings of empty listed channels and
// the channel grows a new one, FIFO intact; a channel holding values, or locked, keeps its ring;
// a released channel leaves the list; and the returner may run on another thread at any moment
// while fibers send, receive and drop channels (ASan and TSan check that it touches nothing
// freed and races with nothing).
#include "grown_rings.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

#include "chan_core.hpp"

namespace {

using weft::Chan;
using weft::detail::ChanCore;
using weft::detail::core_of;
using weft::detail::drop_empty_grown_rings;
using weft::detail::kListedRingBytes;

constexpr std::size_t kValues = kListedRingBytes / sizeof(std::string) * 2;

std::size_t ring_cap(ChanCore* c) {
  c->lock.lock();
  const std::size_t n = c->ring_cap;
  c->lock.unlock();
  return n;
}

void fill(const Chan<std::string>& ch, std::size_t n, std::size_t from) {
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(ch.try_send(std::to_string(from + i)));
}

void drain(const Chan<std::string>& ch, std::size_t n, std::size_t from) {
  for (std::size_t i = 0; i < n; ++i) {
    auto v = ch.try_recv();
    ASSERT_TRUE(v.has_value());
    ASSERT_EQ(*v, std::to_string(from + i));
  }
}

TEST(GrownRings, AnEmptyGrownRingIsFreedAndGrowsAgain) {
  weft::run([] {
    Chan<std::string> ch(kValues);
    ChanCore* c = core_of(ch);
    EXPECT_EQ(ring_cap(c), 0u);
    fill(ch, kValues, 0);
    EXPECT_EQ(ring_cap(c), kValues);
    EXPECT_TRUE(c->ring_listed.load());
    drain(ch, kValues, 0);
    drop_empty_grown_rings();
    EXPECT_EQ(ring_cap(c), 0u);
    EXPECT_FALSE(c->ring_listed.load());
    // Grows again from the first size, and is listed again once large.
    fill(ch, kValues, 100);
    EXPECT_TRUE(c->ring_listed.load());
    drain(ch, kValues, 100);
  });
}

TEST(GrownRings, AChannelHoldingValuesOrLockedKeepsItsRing) {
  weft::run([] {
    Chan<std::string> ch(kValues);
    ChanCore* c = core_of(ch);
    fill(ch, kValues, 0);
    drain(ch, kValues - 1, 0);  // one left
    drop_empty_grown_rings();
    EXPECT_EQ(ring_cap(c), kValues);
    drain(ch, 1, kValues - 1);
    c->lock.lock();  // busy: only tried, so skipped
    drop_empty_grown_rings();
    EXPECT_EQ(c->ring_cap, kValues);
    c->lock.unlock();
    drop_empty_grown_rings();
    EXPECT_EQ(ring_cap(c), 0u);
  });
}

TEST(GrownRings, ARingThatStaysSmallIsNotListed) {
  weft::run([] {
    Chan<std::string> ch(kValues);
    fill(ch, 4, 0);
    EXPECT_FALSE(core_of(ch)->ring_listed.load());
    drain(ch, 4, 0);
  });
}

TEST(GrownRings, AReleasedChannelLeavesTheList) {
  weft::run([] {
    {
      Chan<std::string> ch(kValues);
      fill(ch, kValues, 0);  // listed, and dropped with values in it
    }
    drop_empty_grown_rings();  // ASan: must not touch the freed channel
  });
}

TEST(GrownRings, TheReturnerRacesWithSendersReceiversAndReleases) {
  std::atomic<bool> stop{false};
  std::thread returner([&] {
    while (!stop.load()) drop_empty_grown_rings();
  });
  weft::run([] {
    constexpr int kPairs = 4;
    constexpr int kRounds = 300;
    weft::WaitGroup wg;
    for (int p = 0; p < kPairs; ++p) {
      wg.add(1);
      weft::go([&wg] {
        for (int r = 0; r < kRounds; ++r) {
          Chan<std::string> ch(kValues);
          weft::WaitGroup done;
          done.add(1);
          weft::go([ch, &done] {
            for (std::size_t i = 0; i < kValues; ++i) {
              auto v = ch.recv();
              ASSERT_TRUE(v.has_value());
              ASSERT_EQ(*v, std::to_string(i));
            }
            done.done();
          });
          for (std::size_t i = 0; i < kValues; ++i) ch.send(std::to_string(i));
          done.wait();
          if (r % 2 == 0) fill(ch, kValues / 2, 0);  // dropped holding values
        }
        wg.done();
      });
    }
    wg.wait();
  });
  stop.store(true);
  returner.join();
}

}  // namespace
