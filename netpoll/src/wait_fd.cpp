// wait_readable / wait_writable for foreign fds: the fd is registered with the netpoller while
// waits on it are in progress. Concurrent waits on one fd (a reader and a writer) share one
// descriptor, reference-counted in a small table; each side's deadline is that call's alone (two
// concurrent waits in the same direction on one fd are refused, as for sockets).
#include <cerrno>
#include <mutex>
#include <unordered_map>
#include <weft/net.hpp>
#include <weft/runtime.hpp>

#include "io_errors.hpp"
#include "poll_desc.hpp"

namespace weft::net {
namespace {

struct Shared {
  detail::PollDesc* pd;
  int refs;
};
std::mutex g_mu;
std::unordered_map<int, Shared>& table() {
  static auto* t = new std::unordered_map<int, Shared>();  // g_mu; lives for the process
  return *t;
}

detail::PollDesc* acquire(int fd) {
  std::lock_guard lock(g_mu);
  auto it = table().find(fd);
  if (it != table().end()) {
    ++it->second.refs;
    return it->second.pd;
  }
  detail::PollDesc* pd = detail::poll_open(fd, /*owns_fd=*/false);
  if (pd) table().emplace(fd, Shared{pd, 1});
  return pd;
}

void release(int fd, detail::Mode mode) {
  std::lock_guard lock(g_mu);
  auto it = table().find(fd);
  if (--it->second.refs == 0) {
    detail::poll_close(it->second.pd);
    table().erase(it);
  } else {
    detail::poll_set_deadline(it->second.pd, mode, 0);  // this call's deadline ends with it
  }
}

absl::Status wait_fd(int fd, detail::Mode mode, TimePoint deadline, const char* what,
                     const CancelToken& bound = {}) {
  weft::detail::require_fiber(what);
  detail::PollDesc* pd = acquire(fd);
  if (!pd) {
    const int err = errno;
    if (err == EEXIST) {
      return absl::FailedPreconditionError(
          std::string(what) + " fd " + std::to_string(fd) +
          ": the fd is already registered with the netpoller (a weft socket: use its own calls)");
    }
    return detail::errno_error(err, what, fd);
  }
  if (deadline != TimePoint::max()) {
    const std::int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    detail::poll_set_deadline(pd, mode, ns > 0 ? ns : 1);
  }
  detail::WaitResult w;
  try {
    w = detail::poll_wait(pd, mode, bound);
  } catch (...) {
    release(fd, mode);
    throw;
  }
  release(fd, mode);
  return detail::wait_error(w, what, fd);
}

}  // namespace

absl::Status wait_readable(int fd, TimePoint deadline) {
  return wait_fd(fd, detail::Mode::kRead, deadline, "wait_readable");
}

absl::Status wait_writable(int fd, TimePoint deadline) {
  return wait_fd(fd, detail::Mode::kWrite, deadline, "wait_writable");
}

absl::Status wait_readable(int fd, const CancelToken& bound) {
  return wait_fd(fd, detail::Mode::kRead, TimePoint::max(), "wait_readable", bound);
}

absl::Status wait_writable(int fd, const CancelToken& bound) {
  return wait_fd(fd, detail::Mode::kWrite, TimePoint::max(), "wait_writable", bound);
}

}  // namespace weft::net
