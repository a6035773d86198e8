// wait_readable / wait_writable for foreign fds: the fd is registered with the netpoller for the
// duration of one wait (a descriptor of its own, so its deadline is this call's alone).
#include <cerrno>
#include <weft/net.hpp>
#include <weft/runtime.hpp>

#include "io_errors.hpp"
#include "poll_desc.hpp"

namespace weft::net {
namespace {

absl::Status wait_fd(int fd, detail::Mode mode, TimePoint deadline, const char* what) {
  weft::detail::require_fiber(what);
  detail::PollDesc* pd = detail::poll_open(fd);
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
    w = detail::poll_wait(pd, mode);
  } catch (...) {
    detail::poll_close(pd);
    throw;
  }
  detail::poll_close(pd);
  return detail::wait_error(w, what, fd);
}

}  // namespace

absl::Status wait_readable(int fd, TimePoint deadline) {
  return wait_fd(fd, detail::Mode::kRead, deadline, "wait_readable");
}

absl::Status wait_writable(int fd, TimePoint deadline) {
  return wait_fd(fd, detail::Mode::kWrite, deadline, "wait_writable");
}

}  // namespace weft::net
