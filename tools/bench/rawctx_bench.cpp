// The physical limit for weft's `switch` bench (tools/bench/compare): two execution contexts
// ping-pong with Boost.Context's bare jump_fcontext, the primitive weft itself switches with, on
// one kernel thread. No scheduler, no run queue, no bookkeeping: N jumps in total, reported as ns
// per jump, which is what a scheduler-mediated yield in weft_bench/boostfiber_bench/Go costs at
// best. Same command line and RESULT line as the other programs (bench_util.hpp); only `switch`
// exists.
#include <boost/context/detail/fcontext.hpp>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "bench_util.hpp"

namespace {

namespace ctx = boost::context::detail;

const char* g_prog = "rawctx_bench";

// The second context: jumps straight back to whoever jumped to it, forever. It is never resumed
// after the last jump, so it never returns (returning from a context function would exit the
// thread).
[[noreturn]] void pong(ctx::transfer_t t) {
  for (;;) t = ctx::jump_fcontext(t.fctx, nullptr);
}

int bench_switch(const bench::Args& a) {
  if (a.workers_given && a.workers != 1) bench::usage_error(g_prog, "switch runs on one worker");
  const std::uint64_t half = bench::size_or(a, bench::kSwitchN) / 2;  // jumps per context
  constexpr std::size_t kStackSize = 64 * 1024;
  // make_fcontext aligns the top of the stack down to 16 bytes itself.
  auto stack = std::make_unique<std::uint64_t[]>(kStackSize / sizeof(std::uint64_t));
  void* top = reinterpret_cast<char*>(stack.get()) + kStackSize;
  ctx::transfer_t t{ctx::make_fcontext(top, kStackSize, pong), nullptr};
  const auto t0 = bench::Clock::now();
  for (std::uint64_t i = 0; i < half; ++i)
    t = ctx::jump_fcontext(t.fctx, nullptr);  // there and back
  const double ns = bench::ns_since(t0);
  bench::result("switch", "-", "ns_per_switch", ns / static_cast<double>(2 * half), "ns");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0) g_prog = argv[0];
  const bench::Args a = bench::parse_args(argc, argv);
  if (a.bench == "switch") return bench_switch(a);
  bench::usage_error(g_prog, "unsupported bench: " + a.bench + " (rawctx implements only switch)");
}
