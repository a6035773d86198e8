// The socket BIO under every weft TLS connection. OpenSSL's own socket BIO would do, but for two
// things: it writes with write(2), which raises SIGPIPE on a peer that went away (ours sends with
// MSG_NOSIGNAL), and its errno is read later by whoever asks, when a fiber may have run on the
// thread meanwhile (ours copies it into the Conn right after the call). Reads and writes are
// single non-blocking system calls; EAGAIN sets the retry flags, which OpenSSL turns into
// SSL_ERROR_WANT_READ / WANT_WRITE, which Stream::drive_nonblocking turns into a park.
#include <openssl/bio.h>
#include <sys/socket.h>

#include <cerrno>
#include <mutex>

#include "tls_state.hpp"

namespace weft::tls::detail {
namespace {

Conn* conn_of_bio(BIO* b) { return static_cast<Conn*>(BIO_get_data(b)); }

int bio_write(BIO* b, const char* data, int len) {
  Conn* c = conn_of_bio(b);
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t r = ::send(c->fd, data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    if (r >= 0) return static_cast<int>(r);
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      BIO_set_retry_write(b);
    } else {
      c->bio_errno = err;
    }
    return -1;
  }
}

int bio_read(BIO* b, char* buf, int len) {
  Conn* c = conn_of_bio(b);
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t r = ::recv(c->fd, buf, static_cast<std::size_t>(len), 0);
    if (r >= 0) return static_cast<int>(r);  // 0: the peer closed the TCP connection
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      BIO_set_retry_read(b);
    } else {
      c->bio_errno = err;
    }
    return -1;
  }
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:  // writes go straight to the socket: nothing buffered
    case BIO_CTRL_DUP:
      return 1;
    default:  // pending counts, kTLS, push/pop...: none of it applies
      return 0;
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* const m = [] {
    BIO_METHOD* mm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "weft socket");
    BIO_meth_set_write(mm, bio_write);
    BIO_meth_set_read(mm, bio_read);
    BIO_meth_set_ctrl(mm, bio_ctrl);
    BIO_meth_set_create(mm, bio_create);
    return mm;
  }();
  return m;
}

}  // namespace

BIO* make_socket_bio(Conn* c) {
  BIO* b = BIO_new(socket_method());
  if (b) BIO_set_data(b, c);
  return b;
}

}  // namespace weft::tls::detail
