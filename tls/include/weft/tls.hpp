// weft::tls: TLS 1.2 and 1.3 (OpenSSL 3) on fibers, with the blocking-style API of TcpStream.
//
//   auto ctx = weft::tls::ServerContext::create({.certificates = {{"cert.pem", "key.pem"}},
//                                                .alpn = {"http/1.1"}}).value();
//   for (;;) {
//     auto tcp = listener.accept();
//     if (!tcp.ok()) continue;
//     weft::go([tcp = std::move(*tcp), &ctx]() mutable {
//       absl::StatusOr<weft::tls::TlsStream> s = weft::tls::accept(std::move(tcp), ctx);
//       if (!s.ok()) return;                  // the handshake failed or timed out: says why
//       char buf[4096];
//       while (auto n = s->read(buf, sizeof buf)) { if (*n == 0 || !s->write_all(buf, *n).ok())
//       break; }
//     });
//   }
//
//   auto client = weft::tls::ClientContext::create({}).value();   // the system's CA store
//   absl::StatusOr<weft::tls::TlsStream> c = weft::tls::dial("example.org:443", client);
//
// Every call that would block parks the calling fiber on the socket's readiness (the netpoller),
// never the worker: OpenSSL runs over a non-blocking socket, and its WANT_READ / WANT_WRITE become
// parks, so a handshake or a record in flight costs a worker nothing.
//
// Security defaults: TLS 1.2 and 1.3 only (min_version raises the floor); OpenSSL's default
// cipher suites; renegotiation refused; clients verify the server's certificate chain (against
// the system store or a given CA file) and its host name (or IP address) -- verify = false turns
// both off, for tests only; compression off. A peer that closes the TCP connection without a TLS
// close_notify, mid-record or between records, gives read() kDataLoss (the data may have been
// cut short: a truncation attack looks the same), never a clean end of stream.
//
// Errors are absl::Status values that say which call, which peer (address and fd), what failed
// and OpenSSL's reason text:
//   kUnauthenticated   the peer's certificate was rejected: expired, wrong host, an unknown CA,
//                      self-signed ("certificate has expired"...), or none was sent when required;
//   kUnavailable       the handshake failed on the protocol: no common version or cipher, an
//                      alert from the peer, a peer not speaking TLS ("wrong version number (is the
//                      peer speaking TLS?)"), a reset;
//   kDataLoss          a truncated record, or an end of stream without close_notify;
//   kDeadlineExceeded  the handshake timeout, or a deadline set on the stream;
//   kCancelled         the stream's context, or the fiber's stop request;
//   kFailedPrecondition  a closed stream, a second concurrent reader (or writer);
//   kInvalidArgument   (create) a certificate, key or CA file that cannot be loaded, a key that
//                      does not match its certificate.
//
// Concurrency: as TcpStream, one fiber may read while another writes the same stream; close()
// may come from any fiber or thread and wakes both. Contexts are shared by every connection made
// with them and are safe to use from any number of fibers at once.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/context.hpp"
#include "weft/net.hpp"

namespace weft::tls {

namespace detail {
struct ServerState;  // one SSL_CTX per certificate, the SNI table (tls/src/tls_context.cpp)
struct ClientState;  // the SSL_CTX and the session cache
struct Conn;         // one connection: the TCP stream, the SSL object, its lock
}  // namespace detail

class TlsStream;
class ServerContext;
class ClientContext;
absl::StatusOr<TlsStream> accept(net::TcpStream tcp, const ServerContext& ctx);
absl::StatusOr<TlsStream> connect(net::TcpStream tcp, const ClientContext& ctx,
                                  std::string_view server_name);

enum class Version : std::uint16_t { kTls12 = 0x0303, kTls13 = 0x0304 };

// A certificate chain (PEM: the leaf first, then intermediates) and its private key (PEM).
struct Certificate {
  std::string cert_file;
  std::string key_file;
};

struct ServerConfig {
  // The certificates to serve; at least one. The first is the default; with several, the name a
  // client asks for (SNI) picks the first whose certificate matches it, wildcards included (Go's
  // Config.Certificates).
  std::vector<Certificate> certificates;
  // Application protocols (ALPN) in the server's order of preference, e.g. {"h2", "http/1.1"}. A
  // client that offers some and none of these is refused with a no_application_protocol alert
  // (RFC 7301, as Go does); a client that offers none gets no ALPN.
  std::vector<std::string> alpn;
  // Mutual TLS: a PEM CA bundle. When set, a client must present a certificate that it verifies.
  std::string client_ca_file;
  Version min_version = Version::kTls12;
  // accept() gives up on a handshake that takes longer (a peer that stalls mid-handshake); a
  // deadline or context on the stream bounds it as well. Zero or negative: no timeout of its own.
  std::chrono::nanoseconds handshake_timeout = std::chrono::seconds(10);
  // Session resumption: TLS 1.3 tickets, TLS 1.2 tickets and session ids (a resumed handshake
  // skips the certificate and the key exchange's signature). The ticket keys live in the context:
  // resumption works across connections to this process.
  bool session_resumption = true;
};

struct ClientConfig {
  // Trust anchors: a PEM CA bundle. Empty: the system store (Debian: /etc/ssl/certs).
  std::string ca_file;
  // false turns off certificate and host name verification (Go's InsecureSkipVerify). Anyone on
  // the path can then read and change the traffic: for tests only.
  bool verify = true;
  std::vector<std::string> alpn;   // protocols to offer, in order of preference
  Certificate client_certificate;  // for mutual TLS; empty: none
  Version min_version = Version::kTls12;
  // Bounds connect()'s and dial()'s handshake, as ServerConfig::handshake_timeout does accept()'s.
  std::chrono::nanoseconds handshake_timeout = std::chrono::seconds(10);
  // Sessions kept for resumption, one per server (by name, or address when there is none), the
  // oldest dropped first; 0 turns client-side resumption off.
  std::size_t session_cache_size = 256;
};

// A server's TLS setup: certificates, keys, protocols. Cheap to copy (shared).
class ServerContext {
 public:
  static absl::StatusOr<ServerContext> create(const ServerConfig& config);

 private:
  friend absl::StatusOr<TlsStream> accept(net::TcpStream tcp, const ServerContext& ctx);
  explicit ServerContext(std::shared_ptr<detail::ServerState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::ServerState> state_;
};

// A client's TLS setup: trust, protocols, the session cache. Cheap to copy (shared).
class ClientContext {
 public:
  static absl::StatusOr<ClientContext> create(const ClientConfig& config);
  std::size_t cached_sessions() const;  // sessions held for resumption now

 private:
  friend absl::StatusOr<TlsStream> connect(net::TcpStream tcp, const ClientContext& ctx,
                                           std::string_view server_name);
  explicit ClientContext(std::shared_ptr<detail::ClientState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::ClientState> state_;
};

// A TLS connection over a TcpStream, after its handshake. Move-only; closes on destruction
// (without close_notify: call shutdown() first for a clean end). A moved-from stream is closed.
class TlsStream {
 public:
  TlsStream() noexcept;
  TlsStream(TlsStream&&) noexcept;
  TlsStream& operator=(TlsStream&&) noexcept;
  ~TlsStream();

  // Reads what is available (at least one byte); 0 once the peer sent close_notify.
  absl::StatusOr<std::size_t> read(std::span<std::byte> buf);
  absl::StatusOr<std::size_t> read(void* buf, std::size_t n);
  // Reads exactly buf.size() bytes; kOutOfRange if the stream ends first.
  absl::Status read_full(std::span<std::byte> buf);
  // Writes everything, parking while the peer is slow.
  absl::Status write_all(std::span<const std::byte> data);
  absl::Status write_all(const void* data, std::size_t n);
  absl::Status write_all(std::string_view s);
  // Sends close_notify, then half-closes the TCP connection: the peer reads end of stream, this
  // side can still read. Bounded by the write deadline and the context, as writes are.
  absl::Status shutdown();
  // As Socket::close(): wakes this stream's blocked calls (kFailedPrecondition) and closes the
  // fd. Any fiber or thread; idempotent. Sends no close_notify.
  void close() noexcept;
  bool is_open() const noexcept;
  int fd() const noexcept;

  // As Socket's: absolute, sticky, TimePoint{} clears; interrupt calls in progress.
  void set_deadline(net::TimePoint t);
  void set_read_deadline(net::TimePoint t);
  void set_write_deadline(net::TimePoint t);
  void set_context(Context ctx);
  std::string local_addr() const;
  std::string peer_addr() const;

  // What the handshake agreed.
  std::string alpn() const;         // the application protocol; empty: none
  std::string server_name() const;  // the SNI name: asked for (server) or sent (client)
  Version version() const;
  std::string cipher() const;   // e.g. "TLS_AES_128_GCM_SHA256"
  bool session_reused() const;  // the handshake resumed an earlier session
  // The peer certificate's subject ("CN=localhost"), empty when it sent none (clients usually).
  std::string peer_subject() const;

 private:
  friend absl::StatusOr<TlsStream> accept(net::TcpStream tcp, const ServerContext& ctx);
  friend absl::StatusOr<TlsStream> connect(net::TcpStream tcp, const ClientContext& ctx,
                                           std::string_view server_name);
  explicit TlsStream(std::unique_ptr<detail::Conn> c) noexcept;
  std::unique_ptr<detail::Conn> conn_;
};

// The server side of a handshake on an accepted connection, bounded by handshake_timeout (and
// the stream's deadlines and context). Run it in the connection's fiber, not the accept loop, so
// a slow client delays nobody else. Needs a fiber.
absl::StatusOr<TlsStream> accept(net::TcpStream tcp, const ServerContext& ctx);
// The client side over a connected stream. `server_name` is sent as SNI and verified against the
// certificate (a DNS name, or an IP address, which is verified but not sent); it also keys the
// session cache. Bounded by handshake_timeout. Needs a fiber.
absl::StatusOr<TlsStream> connect(net::TcpStream tcp, const ClientContext& ctx,
                                  std::string_view server_name);
// net::dial_tcp(addr, options), then connect() with addr's host as the server name. The
// options' context bounds the handshake too.
absl::StatusOr<TlsStream> dial(std::string_view addr, const ClientContext& ctx,
                               const net::DialOptions& options = {});

}  // namespace weft::tls
