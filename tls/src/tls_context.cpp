// ServerContext and ClientContext: building the SSL_CTX objects from a config (every setting
// that is ours to choose is chosen here, once), the SNI and ALPN callbacks, and the client's
// session cache. An SSL_CTX is thread-safe once built; nothing here changes one afterwards.
#include <absl/strings/str_cat.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <memory>
#include <string>

#include "tls_errors.hpp"
#include "tls_state.hpp"

namespace weft::tls {
namespace detail {
namespace {

int proto_version(Version v) { return v == Version::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION; }

// ALPN's wire format: each protocol as a length byte and its bytes.
absl::StatusOr<std::string> alpn_wire(const std::vector<std::string>& protos) {
  std::string out;
  for (const std::string& p : protos) {
    if (p.empty() || p.size() > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls: ALPN protocol \"", p, "\" must be 1 to 255 bytes long"));
    }
    out += static_cast<char>(p.size());
    out += p;
  }
  return out;
}

// The settings every weft connection has, client or server.
absl::StatusOr<SslCtxPtr> new_ctx(const SSL_METHOD* method, Version min_version) {
  SslCtxPtr ctx(SSL_CTX_new(method));
  if (!ctx) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tls: SSL_CTX_new failed: ", drain_reasons("out of memory")));
  }
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, proto_version(min_version));
  SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
  SSL_CTX_set_options(
      c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Partial writes: write_all loops over records itself, and may retry with the rest of its
  // buffer from a moved pointer. Released buffers: an idle connection keeps no 16 KiB read and
  // write buffers (what makes idle TLS connections cheap). Read-ahead: one recv takes as many
  // records as the socket has, instead of a header read and a body read per record.
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_read_ahead(c, 1);
  return ctx;
}

absl::Status load_certificate(SSL_CTX* c, const Certificate& cert, const char* whose) {
  if (cert.cert_file.empty() || cert.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls: ", whose, " certificate needs both cert_file and key_file (PEM files)"));
  }
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(c, cert.cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tls: cannot load the certificate chain \"",
                                                   cert.cert_file,
                                                   "\": ", drain_reasons("not a PEM certificate")));
  }
  if (SSL_CTX_use_PrivateKey_file(c, cert.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat("tls: the private key \"", cert.key_file,
                                                     "\" does not match the certificate \"",
                                                     cert.cert_file, "\""));
    }
    return absl::InvalidArgumentError(absl::StrCat("tls: cannot load the private key \"",
                                                   cert.key_file,
                                                   "\": ", drain_reasons("not a PEM private key")));
  }
  if (SSL_CTX_check_private_key(c) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls: the private key \"", cert.key_file, "\" does not match the certificate \"",
        cert.cert_file, "\": ", drain_reasons("key mismatch")));
  }
  return absl::OkStatus();
}

absl::Status load_trust(SSL_CTX* c, const std::string& ca_file) {
  ERR_clear_error();
  if (ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(c) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls: cannot load the system CA store: ", drain_reasons("unknown error")));
    }
    return absl::OkStatus();
  }
  if (SSL_CTX_load_verify_locations(c, ca_file.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tls: cannot load the CA file \"", ca_file,
                                                   "\": ", drain_reasons("not a PEM bundle")));
  }
  return absl::OkStatus();
}

// SNI: move the connection to the first context whose certificate matches the asked-for name.
int on_server_name(SSL* ssl, int*, void* arg) {
  const auto* st = static_cast<const ServerState*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!name) return SSL_TLSEXT_ERR_OK;
  for (const SslCtxPtr& ctx : st->ctxs) {
    X509* cert = SSL_CTX_get0_certificate(ctx.get());
    if (cert && X509_check_host(cert, name, std::strlen(name), 0, nullptr) == 1) {
      if (ctx.get() != SSL_get_SSL_CTX(ssl)) SSL_set_SSL_CTX(ssl, ctx.get());
      break;
    }
  }
  return SSL_TLSEXT_ERR_OK;  // no match: the default certificate (the client decides)
}

// ALPN: the first of the server's protocols that the client offers; none in common is fatal.
int on_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
            unsigned int inlen, void* arg) {
  const auto* st = static_cast<const ServerState*>(arg);
  if (st->alpn.empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(
          &chosen, outlen, reinterpret_cast<const unsigned char*>(st->alpn.data()),
          static_cast<unsigned int>(st->alpn.size()), in, inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// A client session arrived (after a full handshake, or a TLS 1.3 ticket after it): keep it.
int on_new_session(SSL* ssl, SSL_SESSION* sess) {
  Conn* c = conn_of(ssl);
  if (!c || !c->client || c->client->cache_cap == 0 || c->session_key.empty()) return 0;
  // The cache keeps a copy of its own: `sess` stays the connection's (OpenSSL reads it again
  // for the next ticket), and a cached session is touched only under the cache's lock.
  if (SSL_SESSION* copy = SSL_SESSION_dup(sess)) c->client->remember(c->session_key, copy);
  return 0;  // the connection keeps its reference
}

}  // namespace

ClientState::~ClientState() {
  for (auto& [key, s] : sessions) SSL_SESSION_free(s);
}

void ClientState::remember(const std::string& key, SSL_SESSION* s) {
  SSL_SESSION* old = nullptr;
  std::vector<SSL_SESSION*> dropped;
  {
    std::lock_guard<std::mutex> g(cache_mu);
    auto [it, fresh] = sessions.try_emplace(key, s);
    if (!fresh) {
      old = it->second;
      it->second = s;
    } else {
      order.push_back(key);
      while (sessions.size() > cache_cap && !order.empty()) {
        auto gone = sessions.find(order.front());
        order.pop_front();
        if (gone != sessions.end()) {
          dropped.push_back(gone->second);
          sessions.erase(gone);
        }
      }
    }
  }
  if (old) SSL_SESSION_free(old);
  for (SSL_SESSION* d : dropped) SSL_SESSION_free(d);
}

SSL_SESSION* ClientState::recall(const std::string& key) const {
  // A copy per connection, made under the lock: cached sessions are shared with no connection
  // and touched only under cache_mu, so the cache frees one as soon as a newer one replaces it.
  // (Shared ones were ordered only by OpenSSL's reference counts, which TSan cannot see.)
  std::lock_guard<std::mutex> g(cache_mu);
  auto it = sessions.find(key);
  return it == sessions.end() ? nullptr : SSL_SESSION_dup(it->second);
}

}  // namespace detail

absl::StatusOr<ServerContext> ServerContext::create(const ServerConfig& config) {
  using namespace detail;
  if (config.certificates.empty()) {
    return absl::InvalidArgumentError(
        "tls: ServerConfig.certificates is empty: a server needs a certificate and its key "
        "(PEM files)");
  }
  auto st = std::make_shared<ServerState>();
  absl::StatusOr<std::string> alpn = alpn_wire(config.alpn);
  if (!alpn.ok()) return alpn.status();
  st->alpn = std::move(*alpn);
  st->handshake_timeout = config.handshake_timeout;
  for (const Certificate& cert : config.certificates) {
    absl::StatusOr<SslCtxPtr> ctx = new_ctx(TLS_server_method(), config.min_version);
    if (!ctx.ok()) return ctx.status();
    SSL_CTX* c = ctx->get();
    if (absl::Status s = load_certificate(c, cert, "the server's"); !s.ok()) return s;
    if (!config.client_ca_file.empty()) {
      if (absl::Status s = load_trust(c, config.client_ca_file); !s.ok()) return s;
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.client_ca_file.c_str());
      if (names) SSL_CTX_set_client_CA_list(c, names);  // names the acceptable CAs to clients
      SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    static const unsigned char kSessionContext[] = "weft";
    SSL_CTX_set_session_id_context(c, kSessionContext, sizeof kSessionContext - 1);
    if (!config.session_resumption) {
      SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
      SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
      SSL_CTX_set_num_tickets(c, 0);
    }
    SSL_CTX_set_alpn_select_cb(c, on_alpn, st.get());
    st->ctxs.push_back(std::move(*ctx));
  }
  if (st->ctxs.size() > 1) {
    SSL_CTX_set_tlsext_servername_callback(st->ctxs[0].get(), on_server_name);
    SSL_CTX_set_tlsext_servername_arg(st->ctxs[0].get(), st.get());
  }
  return ServerContext(std::move(st));
}

absl::StatusOr<ClientContext> ClientContext::create(const ClientConfig& config) {
  using namespace detail;
  auto st = std::make_shared<ClientState>();
  absl::StatusOr<std::string> alpn = alpn_wire(config.alpn);
  if (!alpn.ok()) return alpn.status();
  st->alpn = std::move(*alpn);
  st->verify = config.verify;
  st->handshake_timeout = config.handshake_timeout;
  st->cache_cap = config.session_cache_size;
  absl::StatusOr<SslCtxPtr> ctx = new_ctx(TLS_client_method(), config.min_version);
  if (!ctx.ok()) return ctx.status();
  SSL_CTX* c = ctx->get();
  if (config.verify) {
    if (absl::Status s = load_trust(c, config.ca_file); !s.ok()) return s;
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, nullptr);
  }
  if (!config.client_certificate.cert_file.empty() || !config.client_certificate.key_file.empty()) {
    if (absl::Status s = load_certificate(c, config.client_certificate, "the client's"); !s.ok()) {
      return s;
    }
  }
  if (!st->alpn.empty() &&
      SSL_CTX_set_alpn_protos(c, reinterpret_cast<const unsigned char*>(st->alpn.data()),
                              static_cast<unsigned int>(st->alpn.size())) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls: cannot set the ALPN protocols: ", drain_reasons("unknown error")));
  }
  if (st->cache_cap > 0) {
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(c, on_new_session);
  } else {
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  }
  st->ctx = std::move(*ctx);
  return ClientContext(std::move(st));
}

std::size_t ClientContext::cached_sessions() const {
  std::lock_guard<std::mutex> g(state_->cache_mu);
  return state_->sessions.size();
}

}  // namespace weft::tls
