/* raw_epoll_server: the "raw limit" peer of the network benches in tools/bench/compare -- what a
 * hand-written event loop costs, with no runtime, no fibers and no per-connection stack.
 *
 *   raw_epoll_server --bench-server=echo|http [--listen=HOST:PORT] [--workers=N]
 *
 * One epoll loop per thread, level-triggered, non-blocking sockets. Single-threaded by default;
 * --workers=N (alias --threads=N) runs N threads, each with its own listening socket bound to the
 * same address with SO_REUSEPORT, so the kernel spreads connections over the loops.
 *
 *   echo  one read() per readiness event into a per-thread 64 KiB buffer, written straight back.
 *   http  requests are recognised only by counting "\r\n\r\n" terminators (a 2-bit match state per
 *         connection survives a terminator split across reads); each one gets a fixed keep-alive
 *         "Hello, World!" response, so pipelined requests are answered in order.
 *
 * Per-connection state is the kernel socket plus one byte (the http match state) in an fd-indexed
 * table; a connection whose peer does not take a whole reply gets a heap buffer for the rest and
 * waits for EPOLLOUT (reading nothing more until it is flushed), and loses it once flushed.
 * Accepted sockets get TCP_NODELAY, as Go's and weft's do. Prints "listening on HOST:PORT" (the
 * real port when given 0) once it accepts connections; SIGTERM/SIGINT exit with status 0 (the
 * kernel closes the sockets).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kBufSize = 64 * 1024, kMaxEvents = 256 };

static const char kResponse[] =
    "HTTP/1.1 200 OK\r\nServer: raw\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n"
    "Hello, World!";
#define RESPONSE_LEN (sizeof kResponse - 1)

static int g_http;
static int g_max_fds;
static struct sockaddr_storage g_addr;
static socklen_t g_addrlen;

struct pending { /* the unwritten rest of a reply */
  size_t len, off;
  char data[];
};

struct loop {
  int ep, lfd;
  unsigned char *match;     /* fd -> "\r\n\r\n" chars matched so far (http) */
  struct pending **pending; /* fd -> unwritten bytes, or NULL */
  char *in, *out;
  size_t out_cap;
};

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void usage(const char *argv0, const char *msg) {
  fprintf(stderr, "%s: %s\nusage: %s --bench-server=echo|http [--listen=HOST:PORT] [--workers=N]\n",
          argv0, msg, argv0);
  exit(2);
}

static void on_signal(int sig) {
  (void)sig;
  _exit(0);
}

static void parse_addr(const char *argv0, const char *spec) {
  char host[256];
  const char *colon = strrchr(spec, ':');
  if (!colon || (size_t)(colon - spec) >= sizeof host) usage(argv0, "--listen must be HOST:PORT");
  memcpy(host, spec, (size_t)(colon - spec));
  host[colon - spec] = '\0';
  char *h = host;
  if (h[0] == '[' && h[strlen(h) - 1] == ']') { /* [::1]:port */
    h[strlen(h) - 1] = '\0';
    ++h;
  }
  struct addrinfo hints = {0}, *res;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int rc = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "%s: --listen=%s: %s\n", argv0, spec, gai_strerror(rc));
    exit(1);
  }
  memcpy(&g_addr, res->ai_addr, res->ai_addrlen);
  g_addrlen = res->ai_addrlen;
  freeaddrinfo(res);
}

static int make_listener(void) {
  int fd = socket(g_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) die("SO_REUSEPORT");
  if (bind(fd, (struct sockaddr *)&g_addr, g_addrlen) < 0) die("bind");
  if (listen(fd, 4096) < 0) die("listen");
  /* Port 0: the first listener learns the port; the others bind to the same one. */
  g_addrlen = sizeof g_addr;
  if (getsockname(fd, (struct sockaddr *)&g_addr, &g_addrlen) < 0) die("getsockname");
  return fd;
}

static void set_interest(struct loop *lp, int fd, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.fd = fd};
  if (epoll_ctl(lp->ep, EPOLL_CTL_MOD, fd, &ev) < 0) die("epoll_ctl MOD");
}

static void close_conn(struct loop *lp, int fd) {
  free(lp->pending[fd]);
  lp->pending[fd] = NULL;
  lp->match[fd] = 0;
  close(fd); /* also leaves the epoll set */
}

/* Writes buf[0..len); keeps what the socket does not take and waits for EPOLLOUT. 0: closed. */
static int send_reply(struct loop *lp, int fd, const char *buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = write(fd, buf + off, len - off);
    if (n > 0) {
      off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pending *p = malloc(sizeof *p + (len - off));
      if (!p) die("malloc");
      p->len = len - off;
      p->off = 0;
      memcpy(p->data, buf + off, len - off);
      lp->pending[fd] = p;
      set_interest(lp, fd, EPOLLOUT); /* read nothing more until the reply is out */
      return 1;
    } else {
      close_conn(lp, fd);
      return 0;
    }
  }
  return 1;
}

static void flush_pending(struct loop *lp, int fd) {
  struct pending *p = lp->pending[fd];
  while (p->off < p->len) {
    ssize_t n = write(fd, p->data + p->off, p->len - p->off);
    if (n > 0) {
      p->off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      close_conn(lp, fd);
      return;
    }
  }
  free(p);
  lp->pending[fd] = NULL;
  set_interest(lp, fd, EPOLLIN);
}

static void on_readable(struct loop *lp, int fd) {
  ssize_t n = read(fd, lp->in, kBufSize);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    close_conn(lp, fd);
    return;
  }
  if (!g_http) {
    send_reply(lp, fd, lp->in, (size_t)n);
    return;
  }
  static const char kTerm[4] = {'\r', '\n', '\r', '\n'};
  unsigned m = lp->match[fd];
  size_t requests = 0;
  for (ssize_t i = 0; i < n; ++i) {
    const char c = lp->in[i];
    if (c == kTerm[m]) {
      if (++m == 4) {
        ++requests;
        m = 0;
      }
    } else {
      m = c == '\r' ? 1 : 0;
    }
  }
  lp->match[fd] = (unsigned char)m;
  if (requests == 0) return;
  const size_t need = requests * RESPONSE_LEN;
  if (need > lp->out_cap) {
    free(lp->out);
    lp->out_cap = need * 2;
    lp->out = malloc(lp->out_cap);
    if (!lp->out) die("malloc");
  }
  for (size_t i = 0; i < requests; ++i) memcpy(lp->out + i * RESPONSE_LEN, kResponse, RESPONSE_LEN);
  send_reply(lp, fd, lp->out, need);
}

static void on_accept(struct loop *lp) {
  for (;;) {
    int fd = accept4(lp->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) perror("accept4"); /* EMFILE: say so */
      return;
    }
    if (fd >= g_max_fds) {
      fprintf(stderr, "raw_epoll_server: fd %d beyond the table (RLIMIT_NOFILE)\n", fd);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl ADD");
  }
}

static void *run_loop(void *arg) {
  struct loop *lp = arg;
  struct epoll_event events[kMaxEvents];
  for (;;) {
    int n = epoll_wait(lp->ep, events, kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == lp->lfd) {
        on_accept(lp);
      } else if (lp->pending[fd]) {
        flush_pending(lp, fd); /* EPOLLOUT, or an error the write will find */
      } else {
        on_readable(lp, fd); /* EPOLLIN, EPOLLHUP or EPOLLERR: the read tells which */
      }
    }
  }
  return NULL;
}

static struct loop *new_loop(void) {
  struct loop *lp = calloc(1, sizeof *lp);
  if (!lp) die("calloc");
  lp->ep = epoll_create1(EPOLL_CLOEXEC);
  if (lp->ep < 0) die("epoll_create1");
  lp->lfd = make_listener();
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lp->lfd};
  if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->lfd, &ev) < 0) die("epoll_ctl ADD listener");
  /* calloc'd tables stay untouched (not resident) until a connection uses their page. */
  lp->match = calloc((size_t)g_max_fds, 1);
  lp->pending = calloc((size_t)g_max_fds, sizeof *lp->pending);
  lp->in = malloc(kBufSize);
  if (!lp->match || !lp->pending || !lp->in) die("calloc");
  return lp;
}

int main(int argc, char **argv) {
  const char *mode = NULL, *listen_spec = "127.0.0.1:0";
  long workers = 1;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strncmp(a, "--bench-server=", 15) == 0) {
      mode = a + 15;
    } else if (strncmp(a, "--listen=", 9) == 0) {
      listen_spec = a + 9;
    } else if (strncmp(a, "--workers=", 10) == 0 || strncmp(a, "--threads=", 10) == 0) {
      char *end;
      workers = strtol(a + 10, &end, 10);
      if (*end || workers < 0 || workers > 1024) usage(argv[0], "bad --workers");
      if (workers == 0) workers = sysconf(_SC_NPROCESSORS_ONLN);
    } else {
      usage(argv[0], "unknown argument");
    }
  }
  if (!mode || (strcmp(mode, "echo") != 0 && strcmp(mode, "http") != 0)) {
    usage(argv[0], "--bench-server must be echo or http");
  }
  g_http = strcmp(mode, "http") == 0;
  parse_addr(argv[0], listen_spec);

  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) die("getrlimit");
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  g_max_fds = rl.rlim_cur > (1u << 22) ? (1 << 22) : (int)rl.rlim_cur;

  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  struct loop **loops = calloc((size_t)workers, sizeof *loops);
  if (!loops) die("calloc");
  for (long i = 0; i < workers; ++i) loops[i] = new_loop();

  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (g_addr.ss_family == AF_INET) {
    struct sockaddr_in *sin = (struct sockaddr_in *)&g_addr;
    inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
    port = ntohs(sin->sin_port);
    printf("listening on %s:%d\n", host, port);
  } else {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&g_addr;
    inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
    port = ntohs(sin6->sin6_port);
    printf("listening on [%s]:%d\n", host, port);
  }
  fflush(stdout);

  for (long i = 1; i < workers; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, run_loop, loops[i]) != 0) die("pthread_create");
  }
  run_loop(loops[0]);
  return 0;
}
