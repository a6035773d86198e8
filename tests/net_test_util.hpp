// Helpers shared by the weft::net tests (net_stream_test, net_cancel_test, net_dgram_fd_test,
// net_echo_test, net_emfile_test): status checks that throw (so a helper can fail a test from any
// depth), byte patterns that tell every connection's data apart, connected socket pairs whose
// deadlines bound every wait, the NetTest fixture, and "is this fiber parked on I/O yet?".
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <weft/weft.hpp>

#include "test_util.hpp"

namespace weft_net_test {

namespace net = weft::net;
using namespace std::chrono_literals;

// Bound on every socket wait that should succeed: a runtime bug fails the test, never hangs it.
inline constexpr std::chrono::seconds kIoBound = weft_test::kSanitized ? 60s : 20s;

inline net::TimePoint in(std::chrono::nanoseconds d) {
  return std::chrono::steady_clock::now() + d;
}

inline std::string text(const absl::Status& s) { return s.ToString(); }

// Options with `workers` (and the watchdog off when asked), without designated initializers
// (Options grows fields; -Wmissing-field-initializers would flag every omitted one).
inline weft::Options with_workers(unsigned workers, bool watchdog = true) {
  weft::Options o;
  o.workers = workers;
  if (!watchdog) o.watchdog_threshold = std::chrono::milliseconds(0);
  return o;
}

// Unwraps a StatusOr or throws (a test fails with the status and `what`).
template <class T>
T must(absl::StatusOr<T> r, std::string_view what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + text(r.status()));
  return std::move(*r);
}

inline void must_ok(const absl::Status& s, std::string_view what) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + ": " + text(s));
}

inline bool contains_ci(std::string_view hay, std::string_view needle) {
  auto lower = [](std::string_view v) {
    std::string out(v);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
  };
  return lower(hay).find(lower(needle)) != std::string::npos;
}

inline int port_of(const std::string& addr) { return std::stoi(addr.substr(addr.rfind(':') + 1)); }

// Deterministic bytes, distinct per seed: byte `off` of stream `seed`.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline void fill_pattern(std::uint64_t seed, std::uint64_t off, char* out, std::size_t n) {
  const std::uint64_t s = mix64(seed);
  std::uint64_t word_index = ~std::uint64_t{0};
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t pos = off + i;
    if ((pos >> 3) != word_index) {
      word_index = pos >> 3;
      word = mix64(s ^ word_index);
    }
    out[i] = static_cast<char>(word >> ((pos & 7) * 8));
  }
}

inline std::string pattern(std::uint64_t seed, std::size_t n, std::uint64_t off = 0) {
  std::string s(n, '\0');
  fill_pattern(seed, off, s.data(), n);
  return s;
}

// A connected TCP pair over loopback, both ends with kIoBound deadlines.
struct TcpPair {
  net::TcpStream client;
  net::TcpStream server;
};

inline TcpPair tcp_pair(std::string_view listen_addr = "127.0.0.1:0") {
  net::TcpListener l = must(net::listen_tcp(listen_addr), "listen_tcp");
  l.set_deadline(in(kIoBound));
  TcpPair p;
  p.client = must(net::dial_tcp(l.local_addr(), kIoBound), "dial_tcp");
  p.server = must(l.accept(), "accept");
  p.client.set_deadline(in(kIoBound));
  p.server.set_deadline(in(kIoBound));
  return p;
}

// Reads until end of stream (bounded by the stream's deadline).
template <class S>
absl::StatusOr<std::string> read_to_eof(S& s, std::size_t limit = 64 << 20) {
  std::string out;
  char buf[4096];
  for (;;) {
    absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);
    if (!n.ok()) return n.status();
    if (*n == 0) return out;
    out.append(buf, *n);
    if (out.size() > limit) return absl::OutOfRangeError("read_to_eof: more than the limit");
  }
}

template <class S>
absl::StatusOr<std::string> read_exactly(S& s, std::size_t n) {
  std::string out(n, '\0');
  absl::Status st = s.read_full(std::as_writable_bytes(std::span(out.data(), out.size())));
  if (!st.ok()) return st;
  return out;
}

inline double ms_between(weft_test::Clock::time_point a, weft_test::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// True once every one of `fiber_ids` is parked waiting for I/O readiness ("[parked: io read fd N"
// or "io write").
inline bool parked_on_io(std::initializer_list<std::uint64_t> fiber_ids) {
  return weft_test::parked_on("io ", fiber_ids);
}

// The suite of most net tests (each file instantiates it with WEFT_INSTANTIATE_WORKERS).
class NetTest : public weft_test::WorkersTest {
 protected:
  // For throughput tests: a read or write_all loop that never has to park holds its worker as
  // long as data flows (there is no preemption), which the watchdog would report.
  weft::Options quiet_opts() const { return with_workers(workers(), /*watchdog=*/false); }
};

// 64 MiB, far more than a stalled TCP connection's buffers hold. Made before weft::run (a fiber
// filling it would hold its worker long enough for the watchdog to complain).
inline const std::string& big_junk() {
  static const std::string junk(64 << 20, 'j');
  return junk;
}

// A non-blocking pipe, closed on destruction.
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    r = p[0];
    w = p[1];
  }
  ~Pipe() {
    close(r);
    close(w);
  }
};

}  // namespace weft_net_test
