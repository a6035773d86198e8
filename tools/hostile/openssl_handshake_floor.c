// openssl_handshake_floor: what OpenSSL itself holds, live, for one server-side TLS handshake
// that has read the client's ClientHello, written its whole first flight (ServerHello ..
// Finished in TLS 1.3; ServerHello .. ServerHelloDone in TLS 1.2) and now waits for the
// client's second flight, a "half-done handshake"; and, for comparison, for a silent SSL
// (SSL_new with its BIO, nothing read). No weft: this is the floor under any server built on
// OpenSSL, for the settings weft's tls/src/tls_context.cpp chooses.
//
//   cc -O2 -Wall -o /tmp/openssl_handshake_floor tools/hostile/openssl_handshake_floor.c -lssl
//   -lcrypto /tmp/openssl_handshake_floor [N=1000]              # byte counts + allocation sites +
//   RSS /tmp/openssl_handshake_floor [N=1000] --no-hooks   # RSS only, without the counting headers
//
// How it counts. CRYPTO_set_mem_functions, called before OpenSSL allocates anything, routes
// every OPENSSL_malloc/realloc/free through wrappers that put a 48-byte header in front of each
// block: the size OpenSSL asked for, the file:line OpenSSL passed (libssl/libcrypto are built
// with file names), the phase it was made in, and links of a list of live blocks. "Requested"
// is the sum of the sizes OpenSSL asked for; "glibc" is what those requests cost in glibc
// malloc chunks without our header (request + 8, rounded up to 16, at least 32). The header
// inflates the RSS of the hooked run, hence --no-hooks for RSS figures.
//
// How it runs. The parent builds the contexts (ECDSA P-256 certificate made in memory), runs a
// few handshakes of each kind to warm OpenSSL's lazily filled caches (algorithm fetches,
// provider stores), then forks one child per variant so each starts from the same heap. A
// child makes N server SSLs, each with a BIO like weft's socket BIO (holds no buffer of its
// own: reads come from a ClientHello made by a fresh client SSL, which is freed at once; writes
// are counted and dropped), steps each server once, keeps all N alive, and reports the live
// OpenSSL bytes and VmRSS it took, per connection.
//
// Single-threaded: the live list has no lock.
#define _GNU_SOURCE
#include <malloc.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// ---- counting allocator -------------------------------------------------------------------

typedef struct Hdr {
  struct Hdr* prev;
  struct Hdr* next;
  size_t size;       // what OpenSSL asked for
  const char* file;  // OpenSSL's OPENSSL_FILE / OPENSSL_LINE of the (latest re)allocation
  int line;
  int phase;  // g_phase when (re)allocated
  long pad;   // to 48 bytes: blocks stay 16-byte aligned
} Hdr;
_Static_assert(sizeof(Hdr) % 16 == 0, "header keeps 16-byte alignment");

static Hdr g_live = {&g_live, &g_live, 0, 0, 0, 0, 0};  // list head
static size_t g_live_bytes, g_live_glibc, g_live_count;
static int g_phase;

static size_t glibc_chunk(size_t n) {
  size_t c = (n + 8 + 15) & ~(size_t)15;
  return c < 32 ? 32 : c;
}
static void link_hdr(Hdr* h, size_t n, const char* file, int line) {
  h->size = n;
  h->file = file;
  h->line = line;
  h->phase = g_phase;
  h->next = g_live.next;
  h->prev = &g_live;
  g_live.next->prev = h;
  g_live.next = h;
  g_live_bytes += n;
  g_live_glibc += glibc_chunk(n);
  g_live_count++;
}
static void unlink_hdr(Hdr* h) {
  h->prev->next = h->next;
  h->next->prev = h->prev;
  g_live_bytes -= h->size;
  g_live_glibc -= glibc_chunk(h->size);
  g_live_count--;
}
static void* count_malloc(size_t n, const char* file, int line) {
  Hdr* h = malloc(sizeof(Hdr) + n);
  if (!h) return NULL;
  link_hdr(h, n, file, line);
  return h + 1;
}
static void count_free(void* p, const char* file, int line) {
  (void)file;
  (void)line;
  if (!p) return;
  Hdr* h = (Hdr*)p - 1;
  unlink_hdr(h);
  free(h);
}
static void* count_realloc(void* p, size_t n, const char* file, int line) {
  if (!p) return count_malloc(n, file, line);
  if (n == 0) {
    count_free(p, file, line);
    return NULL;
  }
  Hdr* h = (Hdr*)p - 1;
  unlink_hdr(h);
  Hdr* nh = realloc(h, sizeof(Hdr) + n);
  if (!nh) {  // the old block is still valid and still live
    link_hdr(h, h->size, h->file, h->line);
    return NULL;
  }
  link_hdr(nh, n, file, line);
  return nh + 1;
}

// A field of /proc/self/status in kB. VmRSS also counts the file pages (libcrypto's code) that
// a fresh fork faults in again (about 1.4 MB once, whatever N); RssAnon counts heap pages only.
static long status_kb(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  const size_t len = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0) kb = strtol(line + len, NULL, 10);
  if (f) fclose(f);
  return kb;
}

static void die(const char* what) {
  fprintf(stderr, "openssl_handshake_floor: %s failed:\n", what);
  ERR_print_errors_fp(stderr);
  exit(1);
}

// ---- a BIO like weft's socket BIO: no buffer of its own -----------------------------------

typedef struct {
  const unsigned char* in;  // bytes the "socket" will deliver
  size_t in_len, in_off;
  size_t written;  // bytes the SSL wrote (dropped)
} Wire;

static int wire_read(BIO* b, char* out, int len) {
  Wire* w = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  if (w->in_off == w->in_len) {
    BIO_set_retry_read(b);
    return -1;
  }
  size_t n = w->in_len - w->in_off;
  if (n > (size_t)len) n = (size_t)len;
  memcpy(out, w->in + w->in_off, n);
  w->in_off += n;
  return (int)n;
}
static int wire_write(BIO* b, const char* in, int len) {
  (void)in;
  Wire* w = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  w->written += (size_t)len;
  return len;
}
static long wire_ctrl(BIO* b, int cmd, long num, void* ptr) {
  (void)b;
  (void)num;
  (void)ptr;
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}
static int wire_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}
static BIO_METHOD* wire_method(void) {
  static BIO_METHOD* m;
  if (!m) {
    m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "fake socket");
    BIO_meth_set_write(m, wire_write);
    BIO_meth_set_read(m, wire_read);
    BIO_meth_set_ctrl(m, wire_ctrl);
    BIO_meth_set_create(m, wire_create);
  }
  return m;
}

// ---- contexts, as tls/src/tls_context.cpp builds them ------------------------------------

static const unsigned char kAlpn[] = "\x08http/1.1";

static int on_alpn(SSL* s, const unsigned char** out, unsigned char* outlen,
                   const unsigned char* in, unsigned int inlen, void* arg) {
  (void)s;
  (void)arg;
  unsigned char* chosen = NULL;
  if (SSL_select_next_proto(&chosen, outlen, kAlpn, sizeof kAlpn - 1, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX* new_ctx(const SSL_METHOD* method) {
  SSL_CTX* c = SSL_CTX_new(method);
  if (!c) die("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
  SSL_CTX_set_options(
      c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_read_ahead(c, 1);
  return c;
}

static SSL_CTX* server_ctx(void) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  if (!key || !x) die("EVP_EC_gen/X509_new");
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char*)"localhost", -1, -1,
                             0);
  X509_set_issuer_name(x, name);
  if (!X509_sign(x, key, EVP_sha256())) die("X509_sign");

  SSL_CTX* c = new_ctx(TLS_server_method());
  if (SSL_CTX_use_certificate(c, x) != 1 || SSL_CTX_use_PrivateKey(c, key) != 1 ||
      SSL_CTX_check_private_key(c) != 1)
    die("loading the certificate");
  X509_free(x);
  EVP_PKEY_free(key);
  static const unsigned char kSessionContext[] = "weft";
  SSL_CTX_set_session_id_context(c, kSessionContext, sizeof kSessionContext - 1);
  // weft's default is session_resumption = true: OpenSSL's server session cache and tickets
  // stay as they are.
  SSL_CTX_set_alpn_select_cb(c, on_alpn, NULL);
  return c;
}

static SSL_CTX* client_ctx(int max_version) {
  SSL_CTX* c = new_ctx(TLS_client_method());
  SSL_CTX_set_max_proto_version(c, max_version);
  SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
  if (SSL_CTX_set_alpn_protos(c, kAlpn, sizeof kAlpn - 1) != 0) die("SSL_CTX_set_alpn_protos");
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  return c;
}

// A fresh client's ClientHello (its own key share), in a malloc'd buffer; the client is freed.
static unsigned char* client_hello(SSL_CTX* cctx, size_t* len) {
  Wire w = {0};  // nothing to read: the client stops after its ClientHello
  SSL* c = SSL_new(cctx);
  BIO* rd = BIO_new(wire_method());
  BIO* mem = BIO_new(BIO_s_mem());  // catches the ClientHello
  if (!c || !rd || !mem) die("client SSL_new");
  BIO_set_data(rd, &w);
  SSL_set_bio(c, rd, mem);
  SSL_set_tlsext_host_name(c, "localhost");
  int r = SSL_connect(c);
  if (r == 1 || SSL_get_error(c, r) != SSL_ERROR_WANT_READ) die("client's first step");
  char* data;
  long n = BIO_get_mem_data(mem, &data);
  unsigned char* out = malloc((size_t)n);
  memcpy(out, data, (size_t)n);
  *len = (size_t)n;
  SSL_free(c);
  return out;
}

// ---- variants -----------------------------------------------------------------------------

enum { kSilent, kTls13, kTls13Free, kTls12, kTls12Free, kTls13Keep, kTls13KeepFree, kVariants };
static const char* const kNames[kVariants] = {
    "silent SSL (SSL_new + BIO + accept state)",
    "TLS 1.3 half-done",
    "TLS 1.3 half-done + SSL_free_buffers",
    "TLS 1.2 half-done",
    "TLS 1.2 half-done + SSL_free_buffers",
    "TLS 1.3 half-done, RELEASE_BUFFERS off",
    "TLS 1.3 half-done, RELEASE_BUFFERS off + SSL_free_buffers",
};
static int g_freed_ok;  // SSL_free_buffers calls that returned 1

// One server connection of variant `v`: returns the SSL, left alive. Client-side work runs in
// phase 1 (freed before it returns); the server's in phase 2.
static SSL* server_conn(int v, SSL_CTX* sctx, SSL_CTX* c13, SSL_CTX* c12, Wire* w) {
  unsigned char* hello = NULL;
  size_t hello_len = 0;
  if (v != kSilent) {
    g_phase = 1;
    hello = client_hello(v == kTls12 || v == kTls12Free ? c12 : c13, &hello_len);
  }
  g_phase = 2;
  memset(w, 0, sizeof *w);
  SSL* s = SSL_new(sctx);
  BIO* b = BIO_new(wire_method());
  if (!s || !b) die("server SSL_new");
  BIO_set_data(b, w);
  SSL_set_bio(s, b, b);
  SSL_set_accept_state(s);
  // The last two variants show what SSL_MODE_RELEASE_BUFFERS (weft sets it) already saves.
  if (v == kTls13Keep || v == kTls13KeepFree) SSL_clear_mode(s, SSL_MODE_RELEASE_BUFFERS);
  if (v != kSilent) {
    w->in = hello;
    w->in_len = hello_len;
    int r = SSL_do_handshake(s);
    if (r == 1 || SSL_get_error(s, r) != SSL_ERROR_WANT_READ) die("server's first step");
    if (w->in_off != w->in_len || w->written == 0) die("server did not read it all / answer");
    if (v == kTls13Free || v == kTls12Free || v == kTls13KeepFree)
      g_freed_ok += SSL_free_buffers(s);
    w->in = NULL;
    w->in_len = w->in_off = 0;
    free(hello);
  }
  g_phase = 0;
  return s;
}

typedef struct {
  const char* file;
  int line;
  size_t size;
  size_t count;
  size_t untouched;  // bytes of whole pages inside these blocks that were never faulted in
} Site;

// Bytes of the whole pages inside [p, p+n) that are not resident (never touched): from
// /proc/self/pagemap's present and swapped bits, which an unprivileged process may read.
static size_t untouched_bytes(const void* p, size_t n) {
  static FILE* pm;
  if (!pm && !(pm = fopen("/proc/self/pagemap", "r"))) return 0;
  const uintptr_t page = 4096;
  uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), end = ((uintptr_t)p + n) & ~(page - 1);
  size_t out = 0;
  for (; a < end; a += page) {
    uint64_t e = 0;
    if (fseek(pm, (long)(a / page * 8), SEEK_SET) != 0 || fread(&e, 8, 1, pm) != 1) return 0;
    if (!(e & (3ull << 62))) out += page;
  }
  return out;
}

static int by_bytes(const void* a, const void* b) {
  const Site* x = a;
  const Site* y = b;
  size_t bx = x->size * x->count, by = y->size * y->count;
  return bx < by ? 1 : bx > by ? -1 : 0;
}

// Groups the live blocks of phase 2 by (file, line, size) and prints them, per connection.
static void print_sites(int n) {
  size_t cap = 256, used = 0;
  Site* sites = calloc(cap, sizeof *sites);
  for (Hdr* h = g_live.next; h != &g_live; h = h->next) {
    if (h->phase != 2) continue;
    size_t i = 0;
    while (i < used && !(sites[i].line == h->line && sites[i].size == h->size &&
                         strcmp(sites[i].file ? sites[i].file : "", h->file ? h->file : "") == 0))
      i++;
    if (i == used) {
      if (used == cap) sites = realloc(sites, (cap *= 2) * sizeof *sites);
      sites[used++] = (Site){h->file, h->line, h->size, 0, 0};
    }
    sites[i].count++;
    if (h->size >= 4096) sites[i].untouched += untouched_bytes(h + 1, h->size);
  }
  qsort(sites, used, sizeof *sites, by_bytes);
  printf("    %-44s %8s %10s %12s %16s\n", "allocation site (OpenSSL file:line)", "size",
         "per conn", "bytes/conn", "untouched/conn");
  size_t shown = 0, rest_bytes = 0, rest_count = 0;
  for (size_t i = 0; i < used; i++) {
    double per = (double)sites[i].count / n;
    if (shown < 25 && per >= 0.5) {
      const char* f = sites[i].file ? sites[i].file : "?";
      const char* slash = strrchr(f, '/');
      char where[64];
      snprintf(where, sizeof where, "%s:%d", slash ? slash + 1 : f, sites[i].line);
      if (sites[i].size >= 4096)
        printf("    %-44s %8zu %10.2f %12.0f %16.0f\n", where, sites[i].size, per,
               per * sites[i].size, (double)sites[i].untouched / n);
      else
        printf("    %-44s %8zu %10.2f %12.0f\n", where, sites[i].size, per, per * sites[i].size);
      shown++;
    } else {
      rest_bytes += sites[i].size * sites[i].count;
      rest_count += sites[i].count;
    }
  }
  if (rest_count)
    printf("    %-44s %8s %10.2f %12.0f\n", "(all other sites)", "", (double)rest_count / n,
           (double)rest_bytes / n);
  free(sites);
}

static void run_variant(int v, int n, int hooks, SSL_CTX* sctx, SSL_CTX* c13, SSL_CTX* c12) {
  SSL** ssls = calloc((size_t)n, sizeof *ssls);
  Wire* wires = calloc((size_t)n, sizeof *wires);
  memset(wires, 0, (size_t)n * sizeof *wires);  // touched now, not during the measurement
  g_freed_ok = 0;
  size_t b0 = g_live_bytes, g0 = g_live_glibc, c0 = g_live_count;
  struct mallinfo2 m0 = mallinfo2();
  long rss0 = status_kb("VmRSS:"), anon0 = status_kb("RssAnon:");
  for (int i = 0; i < n; i++) ssls[i] = server_conn(v, sctx, c13, c12, &wires[i]);
  long rss1 = status_kb("VmRSS:"), anon1 = status_kb("RssAnon:");
  struct mallinfo2 m1 = mallinfo2();
  // glibc's own view: bytes in use (all malloc users, chunk sizes) and the heap's size
  // (arena from sbrk + mmapped), which also holds the free chunks the handshakes left behind.
  const double in_use = ((double)m1.uordblks - (double)m0.uordblks) / n;
  const double heap = ((double)(m1.arena + m1.hblkhd) - (double)(m0.arena + m0.hblkhd)) / n;
  size_t b1 = g_live_bytes, g1 = g_live_glibc, c1 = g_live_count;
  if (hooks) {
    printf("\n%s (N=%d):\n", kNames[v], n);
    printf("  live OpenSSL bytes per conn: requested %.0f, as glibc chunks %.0f, in %.1f blocks\n",
           (double)(b1 - b0) / n, (double)(g1 - g0) / n, (double)(c1 - c0) / n);
    printf("  per conn, inflated by the 48-byte counting headers: RssAnon %.0f, VmRSS %.0f bytes\n",
           (double)(anon1 - anon0) * 1024 / n, (double)(rss1 - rss0) * 1024 / n);
    (void)in_use;
    (void)heap;
    if (v == kTls13Free || v == kTls12Free || v == kTls13KeepFree)
      printf("  SSL_free_buffers returned 1 for %d of %d\n", g_freed_ok, n);
    print_sites(n);
  } else {
    printf(
        "%-58s RssAnon %6.0f, VmRSS %6.0f, glibc in use %6.0f, heap growth %6.0f bytes per "
        "conn (N=%d)\n",
        kNames[v], (double)(anon1 - anon0) * 1024 / n, (double)(rss1 - rss0) * 1024 / n, in_use,
        heap, n);
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  int n = 1000, hooks = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--no-hooks") == 0)
      hooks = 0;
    else if (atoi(argv[i]) > 0)
      n = atoi(argv[i]);
    else {
      fprintf(stderr, "usage: %s [N] [--no-hooks]\n", argv[0]);
      return 2;
    }
  }
  if (hooks && !CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free)) {
    fprintf(stderr,
            "openssl_handshake_floor: CRYPTO_set_mem_functions refused (OpenSSL had "
            "already allocated)\n");
    return 1;
  }
  SSL_CTX* sctx = server_ctx();
  SSL_CTX* c13 = client_ctx(TLS1_3_VERSION);
  SSL_CTX* c12 = client_ctx(TLS1_2_VERSION);
  printf(
      "%s; SSL_CTX set up as weft's ServerContext (P-256 ECDSA certificate, ALPN http/1.1, "
      "RELEASE_BUFFERS, read-ahead, resumption on)\n",
      OpenSSL_version(OPENSSL_VERSION));
  // Warm OpenSSL's lazily filled caches so that no one-time cost lands in a child's figures.
  for (int v = 0; v < kVariants; v++) {
    for (int i = 0; i < 3; i++) {
      Wire w;
      SSL_free(server_conn(v, sctx, c13, c12, &w));
    }
  }
  for (int v = 0; v < kVariants; v++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      run_variant(v, n, hooks, sctx, c13, c12);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "openssl_handshake_floor: the child for \"%s\" failed\n", kNames[v]);
      return 1;
    }
  }
  return 0;
}
