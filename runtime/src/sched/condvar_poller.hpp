// The poller a runtime uses when no I/O layer installed one (weft::net installs its epoll
// poller): nothing to poll, it only blocks the idle worker until woken or the timeout, which is
// how the worker holding the poller seat keeps time for the timers.
#pragma once

#include <memory>

#include "weft/detail/poller.hpp"

namespace weft::detail {

std::unique_ptr<Poller> make_condvar_poller();

}  // namespace weft::detail
