// FiberLocal (weft/sync.hpp) under workers = 1, 2, 4 and 8: each fiber its own value-initialised
// value, the same object for the fiber's whole life across yields (and so across migrations,
// which yields on several workers allow; the test asserts what must hold whether or not one
// happened), destruction when the fiber ends (returned, or unwound at shutdown), destructors that
// set other FiberLocals, and get() outside a fiber.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;

class FiberLocalTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(FiberLocalTest);

std::atomic<int> g_destroyed{0};

struct Counted {
  int value = 0;
  ~Counted() { g_destroyed.fetch_add(1); }
};

TEST_P(FiberLocalTest, EachFiberHasItsOwnValueForItsWholeLife) {
  const int kFibers = 64;
  const int kYields = static_cast<int>(scaled(200));
  weft::run(
      [&] {
        weft::FiberLocal<int> local;
        weft::FiberLocal<std::string> name;
        std::vector<weft::Task<void>> ts;
        for (int i = 0; i < kFibers; ++i) {
          ts.push_back(weft::spawn([&, i] {
            EXPECT_EQ(local.get(), 0);  // value-initialised
            EXPECT_EQ(name.get(), "");
            int* const mine = &local.get();
            local.get() = i;
            name.get() = "fiber " + std::to_string(i);
            for (int k = 0; k < kYields; ++k) {
              weft::this_fiber::yield();
              ASSERT_EQ(&local.get(), mine);
              ASSERT_EQ(local.get(), i);
              ASSERT_EQ(name.get(), "fiber " + std::to_string(i));
            }
          }));
        }
        for (auto& t : ts) t.join();
        EXPECT_EQ(local.get(), 0);  // the main fiber has its own, untouched by the others
      },
      opts());
}

TEST_P(FiberLocalTest, ValuesAreDestroyedWhenTheirFiberEnds) {
  g_destroyed = 0;
  weft::run(
      [&] {
        weft::FiberLocal<Counted> local;
        std::vector<weft::Task<void>> ts;
        for (int i = 0; i < 16; ++i) {
          ts.push_back(weft::spawn([&, i] {
            if (i % 2 == 0) local.get().value = i;  // only half of them ever create one
          }));
        }
        for (auto& t : ts) t.join();  // join returns after the fiber's values are gone
        EXPECT_EQ(g_destroyed.load(), 8);
        // A throwing fiber's value goes too.
        weft::Task<void> thrower = weft::spawn([&] {
          local.get();
          throw std::runtime_error("boom");
        });
        EXPECT_THROW(thrower.join(), std::runtime_error);
        EXPECT_EQ(g_destroyed.load(), 9);
      },
      opts());
}

TEST_P(FiberLocalTest, AFiberUnwoundAtShutdownDestroysItsValues) {
  g_destroyed = 0;
  {
    weft::FiberLocal<Counted> local;
    weft::run(
        [&] {
          weft::go([&] {
            local.get();
            weft::Chan<int> never;
            never.recv();  // parked until shutdown unwinds it
          });
          weft::this_fiber::yield();
        },
        opts());
  }
  EXPECT_EQ(g_destroyed.load(), 1);
}

TEST_P(FiberLocalTest, DestructorsMaySetOtherFiberLocals) {
  g_destroyed = 0;
  weft::run(
      [&] {
        weft::FiberLocal<Counted> second;
        struct SetsSecond {
          weft::FiberLocal<Counted>* second;
          ~SetsSecond() { second->get().value = 1; }
        };
        weft::FiberLocal<SetsSecond> first;
        weft::spawn([&] { first.get().second = &second; }).join();
        EXPECT_EQ(g_destroyed.load(), 1);  // the value set during destruction went too
      },
      opts());
}

TEST(FiberLocalPlainThread, GetOutsideAFiberThrowsLogicError) {
  weft::FiberLocal<int> local;
  EXPECT_THROW(local.get(), std::logic_error);
}

}  // namespace
