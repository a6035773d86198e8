// ChildServer: an example server (echo_server, chat_server, http_server) run as a child process
// for tests that treat it as a black box: started with --listen=127.0.0.1:0 --workers=1, its
// address read from the "listening on HOST:PORT" line it prints, its fds and RSS read from /proc,
// stopped with SIGTERM (or killed when the test ends). Under ASan it runs without the free-memory
// quarantine, which would look like growth. With an fd limit it starts under
// `prlimit --nofile=N:N` (util-linux), soft and hard: the runtime raises a soft limit to the hard
// one, so both are set.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.hpp"

extern char** environ;

namespace weft_test {

// An example server binary as a child process with a pipe on its stdout; killed on destruction.
class ChildServer {
 public:
  // `fd_limit` > 0: the child's RLIMIT_NOFILE, soft and hard (see has_prlimit()).
  explicit ChildServer(std::string bin, int fd_limit = 0)
      : bin_(std::move(bin)), fd_limit_(fd_limit) {}
  static constexpr const char* kPrlimit = "/usr/bin/prlimit";
  static bool has_prlimit() { return access(kPrlimit, X_OK) == 0; }
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;
  ~ChildServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
    if (out_ >= 0) close(out_);
  }

  // Returns "" once it listens (address in addr()), else what went wrong.
  std::string start(std::string extra_flag = "--drain_grace=1s") {
    return start(std::vector<std::string>{std::move(extra_flag)});
  }
  std::string start(std::vector<std::string> extra_flags) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return "pipe2 failed";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    std::string bin = bin_, listen = "--listen=127.0.0.1:0", workers = "--workers=1";
    std::string prlimit = kPrlimit,
                nofile = "--nofile=" + std::to_string(fd_limit_) + ":" + std::to_string(fd_limit_),
                dashes = "--";
    std::vector<char*> argv;
    if (fd_limit_ > 0) argv = {prlimit.data(), nofile.data(), dashes.data()};  // then execs bin
    for (std::string* a : {&bin, &listen, &workers}) argv.push_back(a->data());
    for (std::string& f : extra_flags) argv.push_back(f.data());
    argv.push_back(nullptr);
    // Under ASan freed blocks sit in a quarantine (256 MiB by default) instead of being reused,
    // which would count as growth: the server runs without one.
    std::vector<std::string> env_strings;
    std::string asan = "ASAN_OPTIONS=quarantine_size_mb=0";
    for (char** e = environ; *e; ++e) {
      if (std::string_view(*e).starts_with("ASAN_OPTIONS=")) {
        asan = std::string(*e) + ":quarantine_size_mb=0";
      } else {
        env_strings.emplace_back(*e);
      }
    }
    env_strings.push_back(asan);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    out_ = p[0];
    if (rc != 0) {
      pid_ = -1;
      return "posix_spawn " + bin + " failed: " + std::strerror(rc);
    }
    std::string got;
    while (got.find('\n') == std::string::npos && read_more(&got)) {
    }
    const std::string prefix = "listening on ";
    if (got.rfind(prefix, 0) != 0 || got.find('\n') == std::string::npos) {
      return bin_ + " did not report its address: '" + got + "'";
    }
    addr_ = got.substr(prefix.size(), got.find('\n') - prefix.size());
    return "";
  }

  const std::string& addr() const { return addr_; }

  // SIGTERM, then everything it prints until it exits; *status gets its exit code (-1: killed
  // after a generous bound).
  std::string terminate(int* status) {
    kill(pid_, SIGTERM);
    std::string out;
    while (read_more(&out)) {
    }
    int st = 0;
    pid_t done = 0;
    for (int i = 0; i < (kSanitized ? 6000 : 2000) && done == 0; ++i) {
      done = waitpid(pid_, &st, WNOHANG);  // its stdout closes a moment before it is reaped
      if (done == 0) usleep(10000);
    }
    if (done == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
      *status = -1;
    } else {
      *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    pid_ = -1;
    return out;
  }

  long open_fds() const {
    long n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++n;
    }
    return ec ? -1 : n;
  }

  long rss_bytes() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string key;
    long kib = -1;
    while (in >> key) {
      if (key == "VmRSS:") {
        in >> kib;
        break;
      }
    }
    return kib < 0 ? -1 : kib * 1024;
  }

 private:
  // Appends the child's next output to *into, waiting up to a generous bound; false at its end
  // (or past the bound).
  bool read_more(std::string* into) const {
    pollfd pf{out_, POLLIN, 0};
    if (poll(&pf, 1, kSanitized ? 60000 : 20000) <= 0) return false;
    char buf[512];
    const ssize_t r = read(out_, buf, sizeof buf);
    if (r <= 0) return false;
    into->append(buf, static_cast<std::size_t>(r));
    return true;
  }

  std::string bin_;
  int fd_limit_ = 0;
  pid_t pid_ = -1;
  int out_ = -1;
  std::string addr_;
};

}  // namespace weft_test
