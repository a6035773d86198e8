// gdb_fixture: the program gdb_test debugs. It parks fibers in distinctively named functions
// (a channel receive, a sleep, a mutex, a channel send in a named fiber, a pipe read), keeps one
// fiber spinning on another worker, and then calls fixture_checkpoint() from the main fiber, where
// the test's gdb has a breakpoint. Run without gdb, it shuts down cleanly and exits 0.
//
// The fixture_* functions are noinline and do work after the call that parks, so that each keeps
// its own frame (no inlining, no tail call) in every build type.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// Read by the test through gdb (`eval "weft bt %d", fixture_channel_fiber_id`).
extern "C" {
volatile std::uint64_t fixture_channel_fiber_id = 0;
volatile std::uint64_t fixture_main_fiber_id = 0;
}

namespace {

volatile int g_sink = 0;
std::atomic<bool> g_stop{false};

__attribute__((noinline)) void fixture_waits_on_channel(weft::Chan<int> ch) {
  fixture_channel_fiber_id = weft::this_fiber::id();
  const auto v = ch.recv();
  g_sink = g_sink + (v ? *v : -1);
}

__attribute__((noinline)) void fixture_sleeps() {
  weft::this_fiber::sleep_for(1h);
  g_sink = g_sink + 1;
}

__attribute__((noinline)) void fixture_waits_on_mutex(weft::Mutex& mu) {
  mu.lock();
  g_sink = g_sink + 1;
  mu.unlock();
}

__attribute__((noinline)) void fixture_named_sends(weft::Chan<int> ch) {
  weft::this_fiber::set_name("named-fiber");
  ch.send(42);
  g_sink = g_sink + 1;
}

__attribute__((noinline)) void fixture_reads_pipe(int fd) {
  const absl::Status st = weft::net::wait_readable(fd);
  g_sink = g_sink + (st.ok() ? 1 : 2);
}

__attribute__((noinline)) void fixture_spins() {
  weft::this_fiber::set_name("spinner");
  while (!g_stop.load(std::memory_order_relaxed)) {
    g_sink = g_sink + 1;
  }
}

// Counts the fibers in each state from the runtime's own dump.
int count_state(const std::string& dump, const char* state) {
  const std::string key = std::string("[") + state;
  int n = 0;
  for (std::size_t at = dump.find(key); at != std::string::npos; at = dump.find(key, at + 1)) ++n;
  return n;
}

}  // namespace

bool g_abort = false;  // --abort: dump core at the checkpoint (a core file written by the kernel)

// gdb_test breaks here, with the fibers above parked and the spinner running.
extern "C" __attribute__((noinline, used)) void fixture_checkpoint() {
  if (g_abort) std::abort();
  asm volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  g_abort = argc > 1 && std::string(argv[1]) == "--abort";
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    std::perror("gdb_fixture: pipe");
    return 1;
  }
  weft::Options opts;
  opts.workers = 3;
  opts.watchdog_threshold = 0ms;  // the spinner holds its worker on purpose
  weft::run(
      [&] {
        weft::this_fiber::set_name("fixture-main");
        fixture_main_fiber_id = weft::this_fiber::id();
        weft::Chan<int> recv_ch;
        weft::Chan<int> send_ch;
        weft::Mutex mu;
        mu.lock();
        weft::go([recv_ch] { fixture_waits_on_channel(recv_ch); });
        // A stack of its own size (16 KiB; 256 KiB under the sanitizers), which the script reads
        // from the fiber's size class.
        weft::go(weft::FiberOptions{.name = "small-stack", .stack_size = 16384},
                 [] { fixture_sleeps(); });
        weft::go([&mu] { fixture_waits_on_mutex(mu); });
        weft::go([send_ch] { fixture_named_sends(send_ch); });
        weft::go([fd = pipe_fds[0]] { fixture_reads_pipe(fd); });
        weft::go([] { fixture_spins(); });
        // Wait (bounded) until the five waiters are parked and the spinner runs beside us.
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        std::string dump;
        for (;;) {
          std::ostringstream out;
          weft::dump_fibers(out);
          dump = out.str();
          if (count_state(dump, "parked") == 5 && count_state(dump, "running") == 2) break;
          if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr, "gdb_fixture: fibers never settled:\n%s", dump.c_str());
            std::abort();
          }
          weft::this_fiber::sleep_for(1ms);
        }
        std::fputs(dump.c_str(), stdout);
        std::fflush(stdout);
        fixture_checkpoint();
        // Without gdb: let everything finish.
        g_stop.store(true, std::memory_order_relaxed);
        mu.unlock();
        recv_ch.send(1);
        (void)send_ch.recv();
        if (write(pipe_fds[1], "x", 1) != 1) std::perror("gdb_fixture: write");
      },
      opts);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  std::puts("gdb_fixture: done");
  return 0;
}
