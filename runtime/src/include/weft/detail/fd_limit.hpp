// Raising the open-file soft limit to the hard limit: done once by weft::run and by the net
// layer's poller (a process that holds thousands of connections needs it; the hard limit is the
// administrator's and is never touched).
#pragma once

namespace weft::detail {

void raise_fd_soft_limit() noexcept;

}  // namespace weft::detail
