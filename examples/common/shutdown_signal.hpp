// ShutdownSignal: SIGINT/SIGTERM as something a fiber can wait for. Construct it in main() before
// weft::run(): it blocks the signals in the calling thread, so every thread the runtime starts
// inherits the mask, and reads them from a signalfd that a fiber waits on through the netpoller
// (no async-signal-safety puzzles: the "handler" is ordinary fiber code).
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <weft/chan.hpp>
#include <weft/net.hpp>
#include <weft/runtime.hpp>

namespace examples {

class ShutdownSignal {
 public:
  ShutdownSignal() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    // A shell starts background jobs with SIGINT ignored, and an ignored signal never reaches a
    // signalfd: take the signals back, as Go's signal.Notify does.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    fd_ = signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("signalfd");
      std::exit(1);
    }
  }
  ~ShutdownSignal() { close(fd_); }
  ShutdownSignal(const ShutdownSignal&) = delete;
  ShutdownSignal& operator=(const ShutdownSignal&) = delete;

  // Parks the calling fiber until SIGINT or SIGTERM arrives; returns the signal number.
  int wait() {
    for (;;) {
      signalfd_siginfo info{};
      if (read(fd_, &info, sizeof info) == sizeof info) return static_cast<int>(info.ssi_signo);
      if (absl::Status s = weft::net::wait_readable(fd_); !s.ok()) {
        std::fprintf(stderr, "waiting for signals: %s\n", std::string(s.ToString()).c_str());
        return SIGTERM;
      }
    }
  }

  // The servers' stop channel: a fiber waits for the signal, reports it as
  // "PROGRAM: signal N, shutting down" and sends it on the returned channel (capacity 1).
  // Call from a fiber; the ShutdownSignal must outlive that fiber (it lives in main()).
  weft::Chan<int> stop_channel(const char* program) {
    weft::Chan<int> stop(1);
    weft::go([this, program, stop] {
      const int sig = wait();
      std::printf("%s: signal %d, shutting down\n", program, sig);
      std::fflush(stdout);
      stop.send(sig);
    });
    return stop;
  }

 private:
  sigset_t set_;
  int fd_ = -1;
};

}  // namespace examples
