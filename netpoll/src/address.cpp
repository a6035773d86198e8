// Address parsing and resolution; see address.hpp.
#include "address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>
#include <weft/runtime.hpp>

namespace weft::net::detail {
namespace {

absl::Status bad_addr(const char* what, std::string_view addr, std::string_view why) {
  return absl::InvalidArgumentError(std::string(what) + ": bad address \"" + std::string(addr) +
                                    "\": " + std::string(why));
}

bool parse_port(const std::string& port, std::uint16_t* out) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (ec != std::errc() || p != port.data() + port.size() || v > 65535) return false;
  *out = static_cast<std::uint16_t>(v);
  return true;
}

}  // namespace

absl::Status split_host_port(std::string_view addr, std::string* host, std::string* port,
                             const char* what) {
  std::size_t colon;
  if (!addr.empty() && addr.front() == '[') {
    const std::size_t close = addr.find(']');
    if (close == std::string_view::npos) return bad_addr(what, addr, "missing ']'");
    if (close + 1 >= addr.size() || addr[close + 1] != ':') {
      return bad_addr(what, addr, "missing port after ']'");
    }
    *host = std::string(addr.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = addr.rfind(':');
    if (colon == std::string_view::npos) return bad_addr(what, addr, "missing port");
    *host = std::string(addr.substr(0, colon));
    if (host->find(':') != std::string::npos) {
      return bad_addr(what, addr, "IPv6 hosts need brackets: [::1]:80");
    }
  }
  *port = std::string(addr.substr(colon + 1));
  if (port->empty()) return bad_addr(what, addr, "missing port");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SockAddr>> resolve(std::string_view addr, int socktype, bool passive,
                                              const char* what, const CancelToken& bound) {
  std::string host, port;
  if (absl::Status s = split_host_port(addr, &host, &port, what); !s.ok()) return s;
  std::uint16_t port_num = 0;
  const bool numeric_port = parse_port(port, &port_num);
  if (!numeric_port && port.find_first_not_of("0123456789") == std::string::npos) {
    return bad_addr(what, addr, "port out of range (0-65535)");
  }
  if (numeric_port) {
    // Fast path: numeric hosts (and the wildcard) need no resolver.
    SockAddr a;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (host.empty()) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port_num);
      v4->sin_addr.s_addr = htonl(passive ? INADDR_ANY : INADDR_LOOPBACK);
      a.len = sizeof(sockaddr_in);
      return std::vector<SockAddr>{a};
    }
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port_num);
      a.len = sizeof(sockaddr_in);
      return std::vector<SockAddr>{a};
    }
    if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(port_num);
      a.len = sizeof(sockaddr_in6);
      return std::vector<SockAddr>{a};
    }
  }
  // A name (or a service name as port): getaddrinfo, off the workers.
  struct Result {
    int rc;
    std::vector<SockAddr> addrs;
  };
  // By value: with a bound, the lookup may outlive this frame.
  auto lookup = [host, port, socktype, passive] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = socktype;
    hints.ai_flags = AI_ADDRCONFIG | (passive ? AI_PASSIVE : 0);
    addrinfo* res = nullptr;
    Result out{getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res), {}};
    for (addrinfo* ai = res; out.rc == 0 && ai; ai = ai->ai_next) {
      SockAddr a;
      std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
      a.len = ai->ai_addrlen;
      out.addrs.push_back(a);
    }
    if (res) freeaddrinfo(res);
    return out;
  };
  absl::StatusOr<Result> got = weft::blocking(bound, std::move(lookup));
  if (!got.ok()) {
    return absl::Status(got.status().code(), std::string(what) + ": resolving \"" +
                                                 std::string(addr) +
                                                 "\": " + std::string(got.status().message()));
  }
  Result& r = *got;
  if (r.rc != 0) {
    return absl::NotFoundError(std::string(what) + ": cannot resolve \"" + std::string(addr) +
                               "\": " + gai_strerror(r.rc));
  }
  if (r.addrs.empty()) {
    return absl::NotFoundError(std::string(what) + ": \"" + std::string(addr) +
                               "\" has no addresses");
  }
  return r.addrs;
}

absl::StatusOr<SockAddr> unix_addr(std::string_view path, const char* what) {
  SockAddr a;
  auto* un = reinterpret_cast<sockaddr_un*>(&a.storage);
  if (path.empty() || path.size() >= sizeof(un->sun_path)) {
    return absl::InvalidArgumentError(std::string(what) + ": bad Unix socket path \"" +
                                      std::string(path) + "\" (empty or longer than " +
                                      std::to_string(sizeof(un->sun_path) - 1) + " bytes)");
  }
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return a;
}

std::string format_addr(const SockAddr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  switch (a.family()) {
    case AF_INET: {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a.storage);
      inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
      return std::string(buf) + ":" + std::to_string(ntohs(v4->sin_port));
    }
    case AF_INET6: {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
      inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
      return "[" + std::string(buf) + "]:" + std::to_string(ntohs(v6->sin6_port));
    }
    case AF_UNIX: {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&a.storage);
      if (a.len <= offsetof(sockaddr_un, sun_path)) return "";
      return std::string(un->sun_path,
                         strnlen(un->sun_path, a.len - offsetof(sockaddr_un, sun_path)));
    }
    default:
      return "?";
  }
}

}  // namespace weft::net::detail
