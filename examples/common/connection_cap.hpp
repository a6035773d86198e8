// ConnectionCap: the servers' bound on the connections they serve at once, and the refusal past
// it. Without one, clients that connect and then send nothing (or a partial request) can hold
// every file descriptor of the process: accept() then fails with EMFILE, and new clients wait in
// the kernel's backlog until they time out, without a word (19,995 such connections did that to
// each server). With the cap below the fd limit there are always fds left to accept a client past
// the cap and tell it why it is not served (refuse()), while the read timeouts
// (read_timeouts.hpp) free the slots that slow clients hold.
//
// The cap is lowered to fit the fd limit (RLIMIT_NOFILE's soft limit, which weft::run() has
// raised to the hard limit), minus kReservedFds for the server's own files (listener, poller,
// signals, stdio) and for refusals in flight, and says so on stderr, as Redis does for
// maxclients. Construct it inside weft::run().
//
//   examples::ConnectionCap cap("chat_server", "--max_conns", opts.max_conns);
//   server.serve([&](weft::net::TcpStream& s, const weft::Context&) {
//     std::optional<examples::ConnectionCap::Slot> slot = cap.try_admit();
//     if (!slot) return examples::refuse(s, "! the server is full; try again later\n");
//     ...                                         // the slot is held until the handler returns
//   });
#pragma once

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <weft/net.hpp>

#include "common/linger_close.hpp"

namespace examples {

class ConnectionCap {
 public:
  // fds kept out of the cap: about 10 for the server itself, the rest for refusals in flight
  // (each holds its fd for at most kRefusalTime plus linger_close's 500 ms).
  static constexpr std::size_t kReservedFds = 128;

  // At most `wanted` connections at once (0: as many as the fd limit allows). `program` and
  // `flag` name the setting in the message when it has to be lowered.
  ConnectionCap(const char* program, const char* flag, std::size_t wanted) {
    std::size_t fit = SIZE_MAX;  // no fd limit
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      const auto fds = static_cast<std::size_t>(rl.rlim_cur);
      fit = fds > 2 * kReservedFds ? fds - kReservedFds : fds / 2;
    }
    limit_ = wanted == 0 || wanted > fit ? fit : wanted;
    if (wanted != 0 && limit_ < wanted) {
      std::fprintf(
          stderr,
          "%s: %s=%zu lowered to %zu: the fd limit (ulimit -n) is %llu and %zu fds are kept "
          "for the server's own files and for refusals; raise the limit to serve more\n",
          program, flag, wanted, limit_, static_cast<unsigned long long>(rl.rlim_cur),
          kReservedFds);
    }
  }
  ConnectionCap(const ConnectionCap&) = delete;
  ConnectionCap& operator=(const ConnectionCap&) = delete;

  // One admitted connection; gives its place back when destroyed. Move-only.
  class Slot {
   public:
    Slot(Slot&& o) noexcept : cap_(o.cap_) { o.cap_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (cap_) cap_->in_use_.fetch_sub(1, std::memory_order_relaxed);
    }

   private:
    friend class ConnectionCap;
    explicit Slot(ConnectionCap* c) : cap_(c) {}
    ConnectionCap* cap_;
  };

  // A slot, or nullopt when limit() connections hold one already.
  std::optional<Slot> try_admit() {
    std::size_t n = in_use_.load(std::memory_order_relaxed);
    do {
      if (n >= limit_) return std::nullopt;
    } while (!in_use_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return Slot(this);
  }

  std::size_t limit() const { return limit_; }
  std::size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  std::size_t limit_ = 0;
  std::atomic<std::size_t> in_use_{0};
};

// How long a refusal may take to be written (and, for TLS, its handshake), so that clients past
// the cap cannot hold the reserved fds.
inline constexpr std::chrono::seconds kRefusalTime{1};

// Writes `message` (bounded by kRefusalTime) and ends the connection with linger_close, so the
// message is not lost to a reset when the client has sent something already. For a TcpStream or
// a weft::tls::TlsStream.
template <class Stream>
void refuse(Stream& s, std::string_view message) {
  s.set_write_deadline(std::chrono::steady_clock::now() + kRefusalTime);
  if (s.write_all(message).ok()) linger_close(s);
}

}  // namespace examples
