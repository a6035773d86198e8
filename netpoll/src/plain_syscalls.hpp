// The socket system calls of the read and write hot paths, made without glibc's
// cancellation-point wrappers. read(2), send(2) and sendmsg(2) are POSIX cancellation points:
// in a multi-threaded process glibc brackets each with enabling and disabling asynchronous
// cancellation, two atomic read-modify-writes per call (4.5% of http_server's user time per
// small request, measured with perf). weft's threads are never cancelled (pthread_cancel on a
// worker would strand the fibers on it), so these go through syscall(2): the same system call
// and errno, without the bracket. Calls off the hot path keep the libc functions.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace weft::net::detail {

inline ssize_t plain_read(int fd, void* buf, std::size_t n) noexcept {
  return ::syscall(SYS_read, fd, buf, n);
}

inline ssize_t plain_send(int fd, const void* buf, std::size_t n, int flags) noexcept {
  return ::syscall(SYS_sendto, fd, buf, n, flags, nullptr, 0);
}

inline ssize_t plain_sendmsg(int fd, const msghdr* msg, int flags) noexcept {
  return ::syscall(SYS_sendmsg, fd, msg, flags);
}

}  // namespace weft::net::detail
