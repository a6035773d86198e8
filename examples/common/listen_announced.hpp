// listen_announced: the servers' common start-up step. Listens on `addr` and prints
// "listening on HOST:PORT" (the resolved address, so port 0 shows the port the kernel chose) once
// the listener accepts connections: scripts and tests wait for that line. On failure it prints
// "PROGRAM: <status>" to stderr and returns nullopt, and the server exits 1.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <weft/net.hpp>

namespace examples {

inline std::optional<weft::net::TcpListener> listen_announced(
    const char* program, const std::string& addr, const weft::net::ListenOptions& options = {}) {
  absl::StatusOr<weft::net::TcpListener> l = weft::net::listen_tcp(addr, options);
  if (!l.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, std::string(l.status().ToString()).c_str());
    return std::nullopt;
  }
  std::printf("listening on %s\n", l->local_addr().c_str());
  std::fflush(stdout);
  return std::move(*l);
}

}  // namespace examples
