// The runtime demo: skynet with 1M leaf fibers summed through
// Task::join, then the runtime's own counters.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <weft/runtime.hpp>

namespace {

std::int64_t skynet(std::int64_t num, std::int64_t size) {
  if (size == 1) return num;
  weft::Task<std::int64_t> children[10];
  const std::int64_t child = size / 10;
  for (int i = 0; i < 10; ++i) {
    children[i] = weft::spawn([=] { return skynet(num + i * child, child); });
  }
  std::int64_t sum = 0;
  for (auto& t : children) sum += t.join();
  return sum;
}

}  // namespace

int main() {
  const auto start = std::chrono::steady_clock::now();
  weft::Stats st;
  const std::int64_t sum = weft::run([&] {
    const std::int64_t s = skynet(0, 1000000);
    st = weft::stats();
    return s;
  });
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("skynet: sum=%lld (expected 499999500000) in %.1f ms on %llu workers\n",
              static_cast<long long>(sum), ms, static_cast<unsigned long long>(st.workers));
  std::printf(
      "weft::stats(): fibers_spawned=%llu fibers_alive=%llu switches=%llu steals=%llu "
      "parks=%llu stacks_in_use=%llu stacks_cached=%llu stack_bytes_reserved=%llu\n",
      (unsigned long long)st.fibers_spawned, (unsigned long long)st.fibers_alive,
      (unsigned long long)st.switches, (unsigned long long)st.steals, (unsigned long long)st.parks,
      (unsigned long long)st.stacks_in_use, (unsigned long long)st.stacks_cached,
      (unsigned long long)st.stack_bytes_reserved);
  return sum == 499999500000 ? 0 : 1;
}
