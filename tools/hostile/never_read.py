#!/usr/bin/env python3
"""never_read: clients that pipeline requests and never read the replies (issue 39's probe).

Opens --conns connections to a server, each sending --proto's request over and over without ever
reading, as fast as the server takes them; meanwhile a probe client sends one request at a time
on its own connection (a fresh one after each failure) and times the answer. It reports how many
of the hostile connections the server closed and when, the probe's latency percentiles and
failures, and -- with --pid -- the server's RSS before, at its peak and at the end, with the
peak's growth per hostile connection.

  tools/hostile/never_read.py --addr=127.0.0.1:6379 --proto=resp --conns=2000 --duration=60 \\
      --pid=$(pgrep -n resp_server)
  tools/hostile/never_read.py --addr=127.0.0.1:8080 --proto=http --path=/metrics --tls ...

Protocols: echo (a 64-byte line), resp (PING, or GET of a --value_size-byte value it SETs
first), http (GET --path; --tls for HTTPS, certificate not checked). Stdlib only. Exit status 0
when every hostile connection was closed by the server within --duration and the probe never
failed, 1 otherwise (the figures say which), 2 on a usage or setup error.
"""

import argparse
import errno
import os
import select
import socket
import ssl
import sys
import threading
import time


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def resp_command(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else a.encode()
        out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
    return b"".join(out)


class Proto:
    """What the hostile clients send and what the probe expects back."""

    def __init__(self, args):
        self.args = args
        host = args.addr.rsplit(":", 1)[0]
        if args.proto == "echo":
            self.request = b"x" * 63 + b"\n"
        elif args.proto == "resp":
            if args.value_size > 0:
                self.request = resp_command("GET", "never_read:value")
            else:
                self.request = resp_command("PING")
        elif args.proto == "http":
            self.request = (f"GET {args.path} HTTP/1.1\r\nHost: {host}\r\n\r\n").encode()
        else:
            raise SystemExit(f"never_read: unknown --proto={args.proto}")

    def setup(self, connect):
        """Stores the value the resp GETs read (--value_size)."""
        if self.args.proto != "resp" or self.args.value_size <= 0:
            return
        s = connect(10.0)
        try:
            s.sendall(resp_command("SET", "never_read:value", b"v" * self.args.value_size))
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = s.recv(256)
                if not chunk:
                    break
                got += chunk
            if not got.startswith(b"+OK"):
                raise SystemExit(f"never_read: SET of the value failed: {got!r}")
        finally:
            s.close()

    def probe_request(self):
        if self.args.proto == "resp":
            return resp_command("PING")
        return self.request

    def probe_answered(self, got):
        """True once `got` holds one whole answer to probe_request()."""
        p = self.args.proto
        if p == "echo":
            return len(got) >= len(self.request)
        if p == "resp":
            return got.endswith(b"\r\n")
        head_end = got.find(b"\r\n\r\n")
        if head_end < 0:
            return False
        length = 0
        for line in got[:head_end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        return len(got) >= head_end + 4 + length


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", required=True, help="HOST:PORT of the server")
    ap.add_argument("--proto", default="echo", choices=["echo", "resp", "http"])
    ap.add_argument("--path", default="/", help="http: the path the requests GET")
    ap.add_argument("--value_size", type=int, default=0,
                    help="resp: GET a value of this many bytes (SET first) instead of PING")
    ap.add_argument("--tls", action="store_true", help="http over TLS")
    ap.add_argument("--conns", type=int, default=2000, help="hostile connections")
    ap.add_argument("--duration", type=float, default=60.0,
                    help="seconds to wait for the server to close every hostile connection")
    ap.add_argument("--pid", type=int, default=0, help="the server's pid, to read its RSS")
    ap.add_argument("--rcvbuf", type=int, default=0,
                    help="SO_RCVBUF of the hostile sockets (0: the kernel's default)")
    ap.add_argument("--probe_every", type=float, default=0.02,
                    help="seconds between the probe's requests")
    ap.add_argument("--probe_timeout", type=float, default=5.0,
                    help="seconds a probe request may take before it counts as failed")
    args = ap.parse_args()

    host, port = args.addr.rsplit(":", 1)
    host = host.strip("[]")
    port = int(port)
    proto = Proto(args)
    tls_ctx = None
    if args.tls:
        tls_ctx = ssl.create_default_context()
        tls_ctx.check_hostname = False
        tls_ctx.verify_mode = ssl.CERT_NONE

    def connect(timeout, rcvbuf=0):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        s.connect((host, port))
        if tls_ctx:
            s = tls_ctx.wrap_socket(s, server_hostname=host)
        return s

    try:
        proto.setup(connect)
    except OSError as e:
        print(f"never_read: cannot reach {args.addr}: {e}", file=sys.stderr)
        return 2

    rss_before = rss_bytes(args.pid) if args.pid else None

    # The probe: one request at a time, timed; a failure opens a fresh connection.
    latencies, failures, stop = [], [0], threading.Event()

    def probe():
        s = None
        req = proto.probe_request()
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                if s is None:
                    s = connect(args.probe_timeout)
                s.sendall(req)
                got = b""
                while not proto.probe_answered(got):
                    chunk = s.recv(65536)
                    if not chunk:
                        raise OSError("closed by the server")
                    got += chunk
                latencies.append(time.monotonic() - t0)
            except OSError:
                failures[0] += 1
                if s is not None:
                    s.close()
                s = None
            stop.wait(args.probe_every)
        if s is not None:
            s.close()

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()

    # The hostile connections: non-blocking, written whenever the kernel takes more.
    block = proto.request * max(1, 16384 // len(proto.request))
    conns = {}  # fileno -> [socket, bytes sent, close time or None]
    opened_at = time.monotonic()
    refused = 0
    for _ in range(args.conns):
        try:
            s = connect(10.0, args.rcvbuf)
        except OSError:
            refused += 1
            continue
        s.setblocking(False)
        conns[s.fileno()] = [s, 0, None]
    ramp = time.monotonic() - opened_at
    poller = select.poll()
    for fd in conns:
        poller.register(fd, select.POLLOUT | select.POLLRDHUP | select.POLLHUP | select.POLLERR)

    start = time.monotonic()
    peak_rss = rss_before or 0
    open_count = len(conns)
    close_times = []
    while open_count > 0 and time.monotonic() - start < args.duration:
        for fd, ev in poller.poll(100):
            c = conns[fd]
            if c[2] is not None:
                continue
            gone = ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR)
            if not gone and ev & select.POLLOUT:
                try:
                    while True:
                        n = c[0].send(block)
                        if n <= 0:
                            break
                        c[1] += n
                except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                    pass
                except OSError as e:
                    gone = e.errno in (errno.EPIPE, errno.ECONNRESET) or True
            if gone:
                c[2] = time.monotonic()
                close_times.append(c[2] - start)
                poller.unregister(fd)
                open_count -= 1
        if args.pid:
            r = rss_bytes(args.pid)
            if r:
                peak_rss = max(peak_rss, r)
    elapsed = time.monotonic() - start
    stop.set()
    prober.join(args.probe_timeout + 1)
    rss_end = rss_bytes(args.pid) if args.pid else None
    for c in conns.values():
        c[0].close()

    lat = sorted(latencies)
    ms = lambda v: f"{v * 1000:.1f} ms"
    sent = sum(c[1] for c in conns.values())
    print(f"hostile connections: {len(conns)} opened in {ramp:.1f} s ({refused} refused at connect), "
          f"{len(conns) - open_count} closed by the server within {elapsed:.1f} s, "
          f"{open_count} still open; {sent / max(1, len(conns)) / 1024:.0f} KiB sent per connection")
    if close_times:
        ct = sorted(close_times)
        print(f"closed after: first {ct[0]:.1f} s, median {percentile(ct, 0.5):.1f} s, "
              f"last {ct[-1]:.1f} s (from the end of the ramp)")
    print(f"probe: {len(lat)} answered, {failures[0]} failed; p50 {ms(percentile(lat, 0.5))}, "
          f"p99 {ms(percentile(lat, 0.99))}, max {ms(lat[-1]) if lat else 'n/a'}")
    if args.pid and rss_before:
        per = (peak_rss - rss_before) / max(1, len(conns))
        print(f"server RSS: before {rss_before / 2**20:.1f} MiB, peak {peak_rss / 2**20:.1f} MiB "
              f"({per / 1024:.1f} KiB per hostile connection), end "
              f"{(rss_end or 0) / 2**20:.1f} MiB")
    return 0 if open_count == 0 and failures[0] == 0 and refused == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
