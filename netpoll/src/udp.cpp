// UDP sockets: one datagram per call, parking on EAGAIN like the stream calls.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <weft/net.hpp>
#include <weft/runtime.hpp>

#include "address.hpp"
#include "io_errors.hpp"
#include "poll_desc.hpp"

namespace weft::net {

using detail::Mode;
using detail::PollDesc;
using detail::SockAddr;
using detail::WaitResult;

absl::StatusOr<UdpSocket> listen_udp(std::string_view addr) {
  weft::detail::require_fiber("weft::net::listen_udp");
  auto addrs = detail::resolve(addr, SOCK_DGRAM, /*passive=*/true, "listen_udp");
  if (!addrs.ok()) return addrs.status();
  const SockAddr& a = addrs->front();
  const int fd = ::socket(a.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return detail::errno_error(errno, "listen_udp: socket", -1, addr);
  if (::bind(fd, a.get(), a.len) != 0) {
    const int err = errno;
    ::close(fd);
    return detail::errno_error(err, "listen_udp: bind", fd, addr);
  }
  PollDesc* pd = detail::poll_open(fd);
  if (!pd) {
    const int err = errno;
    ::close(fd);
    return detail::errno_error(err, "listen_udp: registering with the netpoller", fd);
  }
  return UdpSocket(fd, pd);
}

absl::StatusOr<std::size_t> UdpSocket::recv_from(std::span<std::byte> buf, std::string* from) {
  weft::detail::require_fiber("weft::net recv_from()");
  const int fd = this->fd();
  PollDesc* const pd = this->pd();
  detail::IoCall call(pd);
  if (!call.ok() || this->pd() != pd) return detail::closed_error("recv_from", fd);
  // The socket's context is its descriptor's (poll_bind_context): no token of the call's own.
  if (absl::Status s = detail::precheck(pd, Mode::kRead, "recv_from", fd); !s.ok()) return s;
  for (;;) {
    SockAddr a;
    a.len = sizeof a.storage;
    const ssize_t r = ::recvfrom(fd, buf.data(), buf.size(), 0, a.get(), &a.len);
    if (r >= 0) {
      if (from) *from = detail::format_addr(a);
      weft::detail::coop_tick();
      return static_cast<std::size_t>(r);
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN) return detail::errno_error(err, "recv_from", fd);
    if (WaitResult w = detail::poll_wait(pd, Mode::kRead); w != WaitResult::kReady) {
      return detail::wait_error(w, "recv_from", fd);
    }
  }
}

absl::Status UdpSocket::send_to(std::span<const std::byte> data, std::string_view addr) {
  weft::detail::require_fiber("weft::net send_to()");
  const int fd = this->fd();
  PollDesc* const pd = this->pd();
  detail::IoCall call(pd);
  if (!call.ok() || this->pd() != pd) return detail::closed_error("send_to", fd);
  if (absl::Status s = detail::precheck(pd, Mode::kWrite, "send_to", fd); !s.ok()) return s;
  // A name to look up waits in blocking(): bounded by the socket's context, held for the call
  // (the token points into it). The waits on the descriptor follow its binding.
  const Context ctx = context();
  auto addrs = detail::resolve(addr, SOCK_DGRAM, /*passive=*/false, "send_to", ctx);
  if (!addrs.ok()) return addrs.status();
  const SockAddr& a = addrs->front();
  for (;;) {
    const ssize_t r = ::sendto(fd, data.data(), data.size(), MSG_NOSIGNAL, a.get(), a.len);
    if (r >= 0) {
      weft::detail::coop_tick();
      return absl::OkStatus();
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN) return detail::errno_error(err, "send_to", fd, addr);
    if (WaitResult w = detail::poll_wait(pd, Mode::kWrite); w != WaitResult::kReady) {
      return detail::wait_error(w, "send_to", fd);
    }
  }
}

absl::Status UdpSocket::send_to(std::string_view data, std::string_view addr) {
  return send_to(std::as_bytes(std::span(data.data(), data.size())), addr);
}

}  // namespace weft::net
