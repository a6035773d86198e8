// "host:port" strings <-> socket addresses. Numeric hosts parse in place; names go through
// getaddrinfo on the blocking() pool (it may block for seconds on DNS), never on a worker.
#pragma once

#include <absl/status/statusor.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <string_view>
#include <vector>

#include "weft/cancel.hpp"

namespace weft::net::detail {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const noexcept { return storage.ss_family; }
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
};

// Splits "host:port" / "[v6]:port" / ":port". `what` names the call for error messages.
absl::Status split_host_port(std::string_view addr, std::string* host, std::string* port,
                             const char* what);
// Resolves for SOCK_STREAM or SOCK_DGRAM. An empty host means the wildcard when `passive`
// (listening), loopback otherwise. Results in getaddrinfo's order (IPv4 and IPv6 alike). A name
// is resolved on the blocking() pool, waited for within `bound` (a dial's timeout and context):
// when it fires the caller gets kDeadlineExceeded / kCancelled and the lookup finishes unheard.
absl::StatusOr<std::vector<SockAddr>> resolve(std::string_view addr, int socktype, bool passive,
                                              const char* what, const CancelToken& bound = {});
absl::StatusOr<SockAddr> unix_addr(std::string_view path, const char* what);
// "1.2.3.4:80", "[::1]:80", or the path of a Unix socket.
std::string format_addr(const SockAddr& a);

}  // namespace weft::net::detail
