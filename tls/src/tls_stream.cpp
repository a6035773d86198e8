// TlsStream: every call is a loop of non-blocking OpenSSL steps driven by the TCP stream
// (Stream::drive_nonblocking), which parks the fiber on WANT_READ / WANT_WRITE and applies the
// socket's deadlines, context and close. A step takes the connection's lock, clears the thread's
// OpenSSL error queue, makes one SSL call, and turns a failure into a Status before it unlocks
// (tls_state.hpp says why). Handshakes add their own timeout as the drive's bound.
//
// Memory before the handshake: accept() allocates no TLS state until the client's first bytes
// arrive -- a silent connection is a TCP stream and a parked fiber (whose stack hibernates), as
// a plain one is -- and a handshake parked waiting for the client gives back OpenSSL's record
// buffers and the pages its key exchange and signature used on the fiber's stack.
#include <absl/strings/str_cat.h>
#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <cerrno>
#include <mutex>
#include <string>

#include "tls_errors.hpp"
#include "tls_state.hpp"
#include "weft/detail/fiber_api.hpp"
#include "weft/detail/stream_loops.hpp"

namespace weft::tls {
using detail::Conn;
using Want = net::Stream::Want;

namespace detail {
Conn::~Conn() {
  if (ssl) SSL_free(ssl);  // and the BIO, which SSL_set_bio handed it
}
}  // namespace detail

namespace {

absl::Status closed_stream(const char* what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": use of a closed TLS stream (default-constructed or moved from)"));
}

// One step: `call` makes one SSL call (1: success). What it needs next, or kDone with `err` set
// on failure; with `eof`, a close_notify from the peer is kDone with *eof set.
template <class Call>
Want ssl_step(Conn& c, int fd, const char* what, absl::Status& err, Call call,
              bool* eof = nullptr) {
  std::lock_guard<weft::Mutex> g(c.mu);
  c.fd = fd;
  c.bio_errno = 0;
  ERR_clear_error();
  const int r = call();
  if (r == 1) return Want::kDone;
  switch (SSL_get_error(c.ssl, r)) {
    case SSL_ERROR_WANT_READ:
      return Want::kRead;
    case SSL_ERROR_WANT_WRITE:
      return Want::kWrite;
    case SSL_ERROR_ZERO_RETURN:
      if (eof) {
        *eof = true;
        return Want::kDone;
      }
      [[fallthrough]];
    default:
      err = detail::ssl_failure(c, r, what);
      return Want::kDone;
  }
}

absl::StatusOr<std::unique_ptr<Conn>> new_conn(net::TcpStream tcp, SSL_CTX* ctx, const char* what) {
  if (!tcp.is_open())
    return absl::FailedPreconditionError(absl::StrCat(what, ": the TCP stream is closed"));
  auto c = std::make_unique<Conn>();
  c->tcp = std::move(tcp);
  c->fd = c->tcp.fd();
  c->peer = c->tcp.peer_addr();
  ERR_clear_error();
  c->ssl = SSL_new(ctx);
  BIO* bio = c->ssl ? detail::make_socket_bio(c.get()) : nullptr;
  if (!bio) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " with ", c->peer, " (fd ", c->fd, "): ", detail::drain_reasons("out of memory")));
  }
  SSL_set_bio(c->ssl, bio, bio);
  SSL_set_app_data(c->ssl, c.get());
  return c;
}

// The bound of a handshake that starts now: its timeout, or none.
net::TimePoint handshake_bound(std::chrono::nanoseconds timeout) {
  return timeout > std::chrono::nanoseconds::zero() ? std::chrono::steady_clock::now() + timeout
                                                    : net::TimePoint::max();
}

absl::Status handshake(Conn& c, net::TimePoint until, const char* what) {
  absl::Status err;
  absl::Status st = c.tcp.drive_nonblocking(
      what, true,
      [&](int fd) {
        const Want want = ssl_step(c, fd, what, err, [&] {
          const int r = SSL_do_handshake(c.ssl);
          // About to wait for the peer's next flight: give back the record buffers (as read()
          // does; SSL_MODE_RELEASE_BUFFERS alone keeps the read buffer while a read waits).
          if (r != 1 && SSL_get_error(c.ssl, r) == SSL_ERROR_WANT_READ) SSL_free_buffers(c.ssl);
          return r;
        });
        // The step that parses a flight and answers it runs the key exchange and the signature
        // deep on this stack; a handshake stalled by its peer need not keep those pages.
        if (want == Want::kRead) weft::detail::release_stack_below_frame();
        return want;
      },
      until);
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat(st.message(), " (peer ", c.peer, ")"));
  }
  // The key exchange and signature ran deep on this fiber's stack; an idle connection need not
  // keep those pages (a few KiB each of thousands of connections).
  if (err.ok()) weft::detail::release_stack_below_frame();
  return err;
}

// Parks, holding no TLS state, until the client's first bytes arrive (or its end of stream, or
// an error, which the handshake's first read then reports), within `until` and the stream's
// deadlines and context.
absl::Status await_client_hello(net::TcpStream& tcp, net::TimePoint until) {
  absl::Status st = tcp.drive_nonblocking(
      "tls handshake", false,
      [](int fd) {
        char b;
        if (::recv(fd, &b, 1, MSG_PEEK) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          return Want::kRead;
        }
        return Want::kDone;
      },
      until);
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat(st.message(), " waiting for the ClientHello (peer ",
                                                tcp.peer_addr(), ")"));
  }
  return st;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// "host" of "host:port" / "[v6]:port".
std::string host_of(std::string_view addr) {
  if (!addr.empty() && addr.front() == '[') {
    const std::size_t close = addr.find(']');
    return std::string(addr.substr(1, close == std::string_view::npos ? close : close - 1));
  }
  const std::size_t colon = addr.rfind(':');
  return std::string(colon == std::string_view::npos ? addr : addr.substr(0, colon));
}

}  // namespace

TlsStream::TlsStream() noexcept = default;
TlsStream::TlsStream(std::unique_ptr<Conn> c) noexcept : conn_(std::move(c)) {}
TlsStream::TlsStream(TlsStream&&) noexcept = default;
TlsStream& TlsStream::operator=(TlsStream&&) noexcept = default;
TlsStream::~TlsStream() = default;

absl::StatusOr<TlsStream> accept(net::TcpStream tcp, const ServerContext& ctx) {
  const detail::ServerState& st = *ctx.state_;
  const net::TimePoint until = handshake_bound(st.handshake_timeout);
  if (!tcp.is_open())
    return absl::FailedPreconditionError("tls handshake: the TCP stream is closed");
  if (absl::Status s = await_client_hello(tcp, until); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Conn>> c =
      new_conn(std::move(tcp), st.ctxs[0].get(), "tls handshake");
  if (!c.ok()) return c.status();
  (*c)->server = ctx.state_;
  SSL_set_accept_state((*c)->ssl);
  if (absl::Status s = handshake(**c, until, "tls handshake"); !s.ok()) return s;
  return TlsStream(std::move(*c));
}

absl::StatusOr<TlsStream> connect(net::TcpStream tcp, const ClientContext& ctx,
                                  std::string_view server_name) {
  detail::ClientState& st = *ctx.state_;
  std::string name(server_name);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);  // "[::1]": the IPv6 address
  }
  if (st.verify && name.empty()) {
    return absl::InvalidArgumentError(
        "tls connect: no server name to verify the certificate against: pass the host name, or "
        "set ClientConfig.verify = false (tests only)");
  }
  absl::StatusOr<std::unique_ptr<Conn>> made =
      new_conn(std::move(tcp), st.ctx.get(), "tls handshake");
  if (!made.ok()) return made.status();
  Conn& c = **made;
  c.client = ctx.state_;
  c.session_key = name.empty() ? c.peer : name;
  const bool ip = is_ip_literal(name);
  if (st.verify) {
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl), name.c_str())
                      : SSL_set1_host(c.ssl, name.c_str());
    if (ok != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          absl::StrCat("tls connect: \"", name, "\" is not a host name or IP address"));
    }
  }
  if (!ip && !name.empty()) SSL_set_tlsext_host_name(c.ssl, name.c_str());  // SNI: names only
  SSL_set_connect_state(c.ssl);
  if (st.cache_cap > 0) {
    if (SSL_SESSION* s = st.recall(c.session_key)) {
      SSL_set_session(c.ssl, s);
      SSL_SESSION_free(s);
    }
  }
  if (absl::Status s = handshake(c, handshake_bound(st.handshake_timeout), "tls handshake");
      !s.ok()) {
    return s;
  }
  return TlsStream(std::move(*made));
}

absl::StatusOr<TlsStream> dial(std::string_view addr, const ClientContext& ctx,
                               const net::DialOptions& options) {
  absl::StatusOr<net::TcpStream> tcp = net::dial_tcp(addr, options);
  if (!tcp.ok()) return tcp.status();
  const bool bounded = static_cast<CancelToken>(options.context).signal() != nullptr;
  if (bounded) tcp->set_context(options.context);  // bounds the handshake as well
  absl::StatusOr<TlsStream> s = connect(std::move(*tcp), ctx, host_of(addr));
  if (s.ok() && bounded) s->set_context(Context());  // the stream is not bound to it (DialOptions)
  return s;
}

absl::StatusOr<std::size_t> TlsStream::read(void* buf, std::size_t n) {
  if (!conn_) return closed_stream("tls read");
  Conn& c = *conn_;
  if (n == 0) return std::size_t{0};
  std::size_t got = 0;
  bool eof = false;
  absl::Status err;
  absl::Status st = c.tcp.drive_nonblocking("tls read", false, [&](int fd) {
    // WANT_WRITE here: a reply record (a TLS 1.3 key update) waits to go out.
    return ssl_step(
        c, fd, "tls read", err,
        [&] {
          const int r = SSL_read_ex(c.ssl, buf, n, &got);
          // About to park with nothing received: give back the ~17 KiB read buffer SSL_read
          // took for the next record (SSL_MODE_RELEASE_BUFFERS frees it only once a record is
          // consumed), so an idle connection holds none. A no-op while it holds data.
          if (r != 1 && SSL_get_error(c.ssl, r) == SSL_ERROR_WANT_READ) SSL_free_buffers(c.ssl);
          return r;
        },
        &eof);
  });
  if (!st.ok()) return st;
  if (!err.ok()) return err;
  return eof ? std::size_t{0} : got;
}

absl::StatusOr<std::size_t> TlsStream::read(std::span<std::byte> buf) {
  return read(buf.data(), buf.size());
}

absl::Status TlsStream::read_full(std::span<std::byte> buf) {
  return net::detail::read_full_with(buf, "tls read", fd(),
                                     [this](std::byte* p, std::size_t n) { return read(p, n); });
}

absl::Status TlsStream::write_all(const void* data, std::size_t n) {
  if (!conn_) return closed_stream("tls write");
  Conn& c = *conn_;
  const char* p = static_cast<const char*>(data);
  absl::Status err;
  absl::Status st = c.tcp.drive_nonblocking("tls write", true, [&](int fd) {
    // Partial writes are on (tls_context.cpp): each SSL_write_ex sends whole records, and a
    // retry after WANT_WRITE passes the rest of the buffer, which OpenSSL accepts moved.
    while (n > 0) {
      Want want = Want::kDone;
      const std::ptrdiff_t sent =
          net::detail::write_step(p, n, [&](const char* q, std::size_t k) -> std::ptrdiff_t {
            std::size_t w = 0;
            want = ssl_step(c, fd, "tls write", err, [&] { return SSL_write_ex(c.ssl, q, k, &w); });
            return want == Want::kDone && err.ok() ? static_cast<std::ptrdiff_t>(w) : 0;
          });
      if (sent <= 0) return want;
    }
    return Want::kDone;
  });
  if (!st.ok()) return st;
  return err;
}

absl::Status TlsStream::write_all(std::span<const std::byte> data) {
  return write_all(data.data(), data.size());
}

absl::Status TlsStream::write_all(std::string_view s) { return write_all(s.data(), s.size()); }

absl::Status TlsStream::shutdown() {
  if (!conn_) return closed_stream("tls shutdown");
  Conn& c = *conn_;
  absl::Status err;
  absl::Status st = c.tcp.drive_nonblocking("tls shutdown", true, [&](int fd) {
    // 0: our close_notify is sent (the peer's is not waited for, as in Go's CloseWrite).
    return ssl_step(c, fd, "tls shutdown", err, [&] {
      const int r = SSL_shutdown(c.ssl);
      return r >= 0 ? 1 : r;
    });
  });
  if (!st.ok()) return st;
  if (!err.ok()) return err;
  return c.tcp.shutdown_write();
}

void TlsStream::close() noexcept {
  if (conn_) conn_->tcp.close();
}
bool TlsStream::is_open() const noexcept { return conn_ && conn_->tcp.is_open(); }
int TlsStream::fd() const noexcept { return conn_ ? conn_->tcp.fd() : -1; }

void TlsStream::set_deadline(net::TimePoint t) {
  if (conn_) conn_->tcp.set_deadline(t);
}
void TlsStream::set_read_deadline(net::TimePoint t) {
  if (conn_) conn_->tcp.set_read_deadline(t);
}
void TlsStream::set_write_deadline(net::TimePoint t) {
  if (conn_) conn_->tcp.set_write_deadline(t);
}
void TlsStream::set_context(Context ctx) {
  if (conn_) conn_->tcp.set_context(std::move(ctx));
}
std::string TlsStream::local_addr() const { return conn_ ? conn_->tcp.local_addr() : ""; }
std::string TlsStream::peer_addr() const { return conn_ ? conn_->tcp.peer_addr() : ""; }

// The accessors read what the handshake settled, which no later SSL call changes.
std::string TlsStream::alpn() const {
  if (!conn_) return "";
  const unsigned char* p = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(conn_->ssl, &p, &len);
  return p ? std::string(reinterpret_cast<const char*>(p), len) : "";
}

std::string TlsStream::server_name() const {
  if (!conn_) return "";
  const char* n = SSL_get_servername(conn_->ssl, TLSEXT_NAMETYPE_host_name);
  return n ? n : "";
}

Version TlsStream::version() const {
  return conn_ && SSL_version(conn_->ssl) == TLS1_3_VERSION ? Version::kTls13 : Version::kTls12;
}

std::string TlsStream::cipher() const {
  if (!conn_) return "";
  const SSL_CIPHER* c = SSL_get_current_cipher(conn_->ssl);
  return c ? SSL_CIPHER_get_name(c) : "";
}

bool TlsStream::session_reused() const { return conn_ && SSL_session_reused(conn_->ssl) == 1; }

std::string TlsStream::peer_subject() const {
  if (!conn_) return "";
  X509* cert = SSL_get0_peer_certificate(conn_->ssl);
  if (!cert) return "";
  BIO* mem = BIO_new(BIO_s_mem());
  if (!mem) return "";
  X509_NAME_print_ex(mem, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(mem, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(mem);
  return out;
}

}  // namespace weft::tls
