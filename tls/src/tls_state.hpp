// The TLS layer's internal records.
//
// ServerState / ClientState own the SSL_CTX objects (OpenSSL's shared, thread-safe setup) and
// outlive every connection made from them: each Conn holds a shared_ptr to its context's state.
//
// Conn is one connection. Its SSL object is not thread-safe, so `mu` (a fiber Mutex) guards it:
// each call holds it for one non-blocking OpenSSL step only and never while parked on the
// socket (Stream::drive_nonblocking parks between steps), so a reader waiting for data never
// holds up a writer. OpenSSL keeps its error queue per thread; a step reads it before it unlocks,
// on the thread that made the call, so a fiber that moves between workers sees its own errors.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include <weft/sync.hpp>
#include <weft/tls.hpp>

namespace weft::tls::detail {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

struct ServerState {
  // One SSL_CTX per certificate, in ServerConfig order; [0] is the default that handshakes start
  // on, and the SNI callback switches a connection to another whose certificate matches.
  std::vector<SslCtxPtr> ctxs;
  std::string alpn;  // ALPN protocols in the server's order, wire format (length-prefixed)
  std::chrono::nanoseconds handshake_timeout{};
};

struct ClientState {
  SslCtxPtr ctx;
  std::string alpn;  // wire format
  bool verify = true;
  std::chrono::nanoseconds handshake_timeout{};
  std::size_t cache_cap = 0;

  // The session cache: the newest session per server key, the oldest dropped past cache_cap.
  mutable std::mutex cache_mu;                             // short, never held across a park
  std::unordered_map<std::string, SSL_SESSION*> sessions;  // owns one reference each
  std::deque<std::string> order;                           // keys, oldest first (may repeat)
  ~ClientState();
  void remember(const std::string& key, SSL_SESSION* s);  // takes it (a copy no SSL uses)
  SSL_SESSION* recall(const std::string& key) const;      // a copy (the caller owns it), or null
};

struct Conn {
  net::TcpStream tcp;
  SSL* ssl = nullptr;
  weft::Mutex mu;           // guards ssl (see the header comment)
  int fd = -1;              // the fd drive_nonblocking pinned for the step in progress
  int bio_errno = 0;        // the errno of the BIO's last failed system call
  std::string peer;         // "host:port" of the peer, for errors
  std::string session_key;  // clients: the cache key
  std::shared_ptr<const ServerState> server;
  std::shared_ptr<ClientState> client;  // remembers sessions
  ~Conn();
};

// The BIO that OpenSSL reads and writes through: recv/send on the connection's non-blocking fd
// (MSG_NOSIGNAL), EAGAIN reported as "retry", the errno of a failure kept in Conn::bio_errno.
BIO* make_socket_bio(Conn* c);

// Called from the SNI callback and the session callback: SSL app data is the Conn.
inline Conn* conn_of(SSL* ssl) { return static_cast<Conn*>(SSL_get_app_data(ssl)); }

}  // namespace weft::tls::detail
