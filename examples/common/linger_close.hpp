// linger_close: a server's polite end of a connection after its last reply (a protocol error,
// QUIT, a line too long, a timeout, a refusal). It half-closes (a TLS stream sends close_notify
// first), then reads and discards what the peer still sends for up to 500 ms (at most 1 MiB), so
// that the close does not find unread input: closing with unread input sends a reset, which can
// destroy the reply still in flight to the peer. Works on weft::net::TcpStream and
// weft::tls::TlsStream.
#pragma once

#include <chrono>
#include <cstddef>
#include <weft/net.hpp>

namespace examples {

template <class Stream>
void linger_close(Stream& s) {
  absl::Status ended;
  if constexpr (requires { s.shutdown_write(); }) {
    ended = s.shutdown_write();
  } else {
    ended = s.shutdown();  // weft::tls::TlsStream: close_notify, then the TCP half-close
  }
  if (!ended.ok()) return;
  s.set_read_deadline(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
  char buf[1024];
  std::size_t discarded = 0;
  while (discarded < (std::size_t{1} << 20)) {
    absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);
    if (!n.ok() || *n == 0) return;
    discarded += *n;
  }
}

}  // namespace examples
