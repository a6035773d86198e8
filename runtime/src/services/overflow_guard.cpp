// Stack overflow handler; design in overflow_guard.hpp. Everything in the handler is
// async-signal-safe: no allocation, no locks, no stdio; it formats into a local buffer and
// write()s.
#include "services/overflow_guard.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "sched/scheduler.hpp"

namespace weft::detail {
namespace {

constexpr std::size_t kAltStackSize = 64 * 1024;
struct sigaction g_previous;
bool g_installed = false;
thread_local stack_t t_previous_altstack{};  // restored when the worker stops (ASan has its own)
Runtime* g_rt = nullptr;

void append(char*& p, char* end, const char* s) {
  while (*s && p < end) *p++ = *s++;
}

void append_u64(char*& p, char* end, unsigned long long v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n && p < end) *p++ = digits[--n];
}

void on_segv(int sig, siginfo_t* info, void* uctx) {
  Worker* w = current_worker();
  Fiber* f = w ? w->current : nullptr;
  char* stack = f ? f->stack.load(std::memory_order_relaxed) : nullptr;
  if (stack && g_rt && g_rt->stacks().guard_pages()) {
    const char* addr = static_cast<const char*>(info->si_addr);
    const std::size_t page = g_rt->stacks().page_size();
    if (addr >= stack - page && addr < stack) {
      char buf[512];
      char* p = buf;
      char* end = buf + sizeof(buf) - 1;
      append(p, end, "weft: fiber ");
      append_u64(p, end, f->id);
      append(p, end, " \"");
      if (f->name) append(p, end, f->name->c_str());
      append(p, end, "\" overflowed its ");
      append_u64(p, end, g_rt->stacks().class_size(f->stack_class) / 1024);
      if (f->stack_class == 0) {
        append(p, end, " KiB stack; raise Options::stack_size or WEFT_STACK_SIZE\n");
      } else {
        append(p, end,
               " KiB stack (its own size, from FiberOptions::stack_size or the stack-size table "
               "for its name); raise that size\n");
      }
      if (write(STDERR_FILENO, buf, static_cast<std::size_t>(p - buf)) < 0) {
      }
      signal(SIGABRT, SIG_DFL);
      abort();
    }
  }
  // Not ours: hand it to whoever handled SIGSEGV before us.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) {
      g_previous.sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGSEGV, SIG_DFL);  // returning re-executes the access and dumps core as usual
}

}  // namespace

void install_overflow_handler(Runtime& rt) {
  g_rt = &rt;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = &on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  g_installed = sigaction(SIGSEGV, &sa, &g_previous) == 0;
}

void remove_overflow_handler() {
  if (g_installed) sigaction(SIGSEGV, &g_previous, nullptr);
  g_installed = false;
  g_rt = nullptr;
}

void install_overflow_altstack(Worker& w) {
  if (w.altstack) return;
  void* mem =
      mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = mem;
  ss.ss_size = kAltStackSize;
  if (sigaltstack(&ss, &t_previous_altstack) != 0) {
    munmap(mem, kAltStackSize);
    return;
  }
  w.altstack = mem;
}

void remove_overflow_altstack(Worker& w) {
  if (!w.altstack) return;
  if (t_previous_altstack.ss_sp && !(t_previous_altstack.ss_flags & SS_DISABLE)) {
    sigaltstack(&t_previous_altstack, nullptr);
  } else {
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
  }
  t_previous_altstack = stack_t{};
  munmap(w.altstack, kAltStackSize);
  w.altstack = nullptr;
}

}  // namespace weft::detail
