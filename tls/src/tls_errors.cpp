#include "tls_errors.hpp"

#include <absl/strings/str_cat.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <string.h>  // strerrordesc_np

namespace weft::tls::detail {
namespace {

// Reasons that mean a certificate was rejected, by us or (as an alert) by the peer.
bool is_certificate_reason(int reason) {
  switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

// Reasons a peer that does not speak TLS produces (plain text, HTTP, another protocol).
bool is_not_tls_reason(int reason) {
  return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
         reason == SSL_R_HTTPS_PROXY_REQUEST || reason == SSL_R_UNKNOWN_PROTOCOL ||
         reason == SSL_R_PACKET_LENGTH_TOO_LONG;
}

}  // namespace

std::string drain_reasons(const char* fallback) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* r = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += r ? r : absl::StrCat("error ", absl::Hex(e));
  }
  return out.empty() ? std::string(fallback) : out;
}

absl::Status ssl_failure(Conn& c, int ret, const char* what) {
  const int code = SSL_get_error(c.ssl, ret);
  const std::string where =
      absl::StrCat(what, " with ", c.peer.empty() ? "?" : c.peer, " (fd ", c.fd, ")");
  if (code == SSL_ERROR_SYSCALL && c.bio_errno != 0) {
    const int err = c.bio_errno;
    ERR_clear_error();
    const char* d = ::strerrordesc_np(err);
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(where, ": ", d ? d : "unknown error"));
  }
  const unsigned long first = ERR_peek_error();
  const int reason = first ? ERR_GET_REASON(first) : 0;
  if (code == SSL_ERROR_SYSCALL || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ERR_clear_error();
    const bool handshaking = !SSL_is_init_finished(c.ssl);
    return absl::DataLossError(absl::StrCat(
        where, handshaking
                   ? ": the peer closed the connection during the handshake"
                   : ": the peer closed the connection without a TLS close_notify; what was "
                     "received may have been cut short"));
  }
  if (code == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    return absl::UnavailableError(
        absl::StrCat(where, ": the peer ended the TLS session (close_notify)"));
  }
  if (code != SSL_ERROR_SSL) {
    ERR_clear_error();
    return absl::InternalError(absl::StrCat(where, ": unexpected OpenSSL result ", code));
  }
  std::string reasons = drain_reasons("TLS protocol error");
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    const long v = SSL_get_verify_result(c.ssl);
    if (v != X509_V_OK) {
      absl::StrAppend(&reasons, ": ", X509_verify_cert_error_string(v));
      if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        absl::StrAppend(&reasons, " (the certificate is not for \"", c.session_key, "\")");
      }
    }
  }
  if (is_not_tls_reason(reason)) reasons += " (is the peer speaking TLS?)";
  const std::string msg = absl::StrCat(where, ": ", reasons);
  if (is_certificate_reason(reason)) return absl::UnauthenticatedError(msg);
  return absl::UnavailableError(msg);
}

}  // namespace weft::tls::detail
