// The loops that weft's two byte streams share, each over the stream's own single step:
// net::Stream (socket.cpp, a syscall per step) and tls::TlsStream (tls_stream.cpp, an OpenSSL call
// per step). In-tree only: netpoll and tls get netpoll/src/include on their include path
// (weft_netpoll_internal); it is not installed.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <cstddef>
#include <span>
#include <string>

namespace weft::net::detail {

// Fills `buf` by calling read_once(data, n) -- one read of at most n bytes, 0 at the end of the
// stream, as Stream::read and TlsStream::read are -- until it is full. An error from read_once is
// returned as it is; an end of stream before `buf` is full is kOutOfRange,
// "<what> fd <fd>: end of stream after <got> of <size> bytes".
template <class ReadOnce>
absl::Status read_full_with(std::span<std::byte> buf, const char* what, int fd,
                            ReadOnce&& read_once) {
  std::size_t got = 0;
  while (got < buf.size()) {
    absl::StatusOr<std::size_t> n = read_once(buf.data() + got, buf.size() - got);
    if (!n.ok()) return n.status();
    if (*n == 0) {
      return absl::OutOfRangeError(std::string(what) + " fd " + std::to_string(fd) +
                                   ": end of stream after " + std::to_string(got) + " of " +
                                   std::to_string(buf.size()) + " bytes");
    }
    got += *n;
  }
  return absl::OkStatus();
}

// write_all's step: one write_once(p, n) of the unsent bytes [p, p + n), which returns how many it
// sent (> 0), or a value <= 0 when it sent nothing (the caller's "would block" or error). Moves p
// and n past what was sent and returns write_once's result.
template <class WriteOnce>
auto write_step(const char*& p, std::size_t& n, WriteOnce&& write_once) {
  const auto r = write_once(p, n);
  if (r > 0) {
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return r;
}

}  // namespace weft::net::detail
