// How an OpenSSL failure becomes an absl::Status (the codes are listed in weft/tls.hpp): the call,
// the peer and fd, what failed, and OpenSSL's own reason text. Must run on the thread that made
// the failing call, before anything can park: OpenSSL's error queue is per thread.
#pragma once

#include <absl/status/status.h>

#include <string>
#include <string_view>

#include "tls_state.hpp"

namespace weft::tls::detail {

// What the failed SSL call (its return value `ret`) means. `what` is "tls handshake",
// "tls read"... Drains the thread's error queue.
absl::Status ssl_failure(Conn& c, int ret, const char* what);
// OpenSSL's queued reasons joined with "; " (the queue is drained); `fallback` if none.
std::string drain_reasons(const char* fallback);

}  // namespace weft::tls::detail
