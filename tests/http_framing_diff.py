#!/usr/bin/env python3
"""Differential test of HTTP/1.1 framing: examples/http_server against nginx (Debian's nginx-light).

Each case of CORPUS is sent as raw bytes on a fresh connection to both servers, the write side is
then half-closed, and the answer is read until the server closes (or READ_BOUND passes). An answer
is classified as its sequence of responses, each by status code, plus whether the server closed:
"framing" is how many responses came before the close. For http_server the exact sequence must be
the case's `weft` entry. For nginx the status *classes* (2xx, 4xx, 5xx) and the number of
responses must match http_server's, unless the case carries `differs`: the reason, with its RFC
section, why http_server's answer is the right one (or the stricter safe one). A documented
difference that no longer differs fails too, so the corpus stays true.

nginx runs with a config of its own under a temporary prefix (daemon off, master_process off,
error_log in the prefix, `location /` returning a fixed body) on a loopback port in 20000-31999.
Without nginx (install-deps.sh installs nginx-light) the test prints a SKIPPED line and exits 77.

  http_framing_diff.py --server build/examples/http_server [--nginx /usr/sbin/nginx] [--table]

--table prints every case's answers from both servers (to write or check a corpus entry).
"""
import argparse
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

READ_BOUND = 5.0  # seconds an answer may take to end (a close), per case and server

H = "Host: t\r\n"
GET = "GET / HTTP/1.1\r\n" + H + "\r\n"

# Each case: name, raw request bytes, weft: the statuses http_server answers, in order, before it
# closes (the half-close ends every connection, so a case's whole answer is always bounded);
# differs: why nginx's answer is of another class and which one is right. A status of 0 stands for
# an answer without a status line (HTTP/0.9 style).
TE_NOT_CHUNKED = ("RFC 9112 6.3: a request whose Transfer-Encoding does not end in chunked has no "
                  "knowable length and MUST get 400 and a close; nginx answers 501 (6.1's SHOULD "
                  "for a coding it does not know); both reject and close")

CORPUS = [
    # --- What held before, and must hold.
    dict(name="plain GET", raw=GET, weft=[200]),
    dict(name="pipelined GET x3", raw=GET * 3, weft=[200, 200, 200]),
    dict(name="HEAD then GET", raw="HEAD / HTTP/1.1\r\n" + H + "\r\n" + GET, weft=[200, 200]),
    dict(name="HTTP/1.0 without Host", raw="GET / HTTP/1.0\r\n\r\n", weft=[200]),
    dict(name="Connection: close stops the pipeline",
         raw="GET / HTTP/1.1\r\n" + H + "Connection: close\r\n\r\n" + GET, weft=[200]),
    dict(name="POST with Content-Length body",
         raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\n\r\nhello" + GET, weft=[405, 200],
         differs="nginx answers `return 200` for any method; http_server serves GET and HEAD only "
                 "(RFC 9110 15.5.6: 405 for a method the target does not support)"),
    dict(name="chunked body",
         raw="POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
             "3\r\nabc\r\n0\r\n\r\n" + GET, weft=[405, 200],
         differs="405 for POST, as in 'POST with Content-Length body'"),
    dict(name="chunk extensions",
         raw="POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
             "3;name=value\r\nabc\r\n0\r\n\r\n" + GET, weft=[405, 200],
         differs="405 for POST, as in 'POST with Content-Length body'"),
    dict(name="chunked with trailer",
         raw="POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
             "3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n" + GET, weft=[405, 200],
         differs="405 for POST, as in 'POST with Content-Length body'"),
    dict(name="absolute-form target",
         raw="GET http://t/ HTTP/1.1\r\n" + H + "\r\n", weft=[200]),
    dict(name="query string", raw="GET /?a=1 HTTP/1.1\r\n" + H + "\r\n", weft=[200]),
    dict(name="unknown path", raw="GET /nope HTTP/1.1\r\n" + H + "\r\n", weft=[404],
         differs="nginx's `location /` answers every path; http_server has three routes and "
                 "404 for the rest (RFC 9110 15.5.5)"),
    # --- Smuggling: Content-Length.
    dict(name="CL.CL conflicting",
         raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
         weft=[400]),
    dict(name="CL.CL duplicate equal",
         raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
         weft=[400]),
    dict(name="CL list", raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 5, 5\r\n\r\nhello",
         weft=[400]),
    dict(name="CL with plus sign", raw="POST / HTTP/1.1\r\n" + H + "Content-Length: +5\r\n\r\nhello",
         weft=[400]),
    dict(name="CL negative", raw="POST / HTTP/1.1\r\n" + H + "Content-Length: -1\r\n\r\n",
         weft=[400]),
    dict(name="CL hex", raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 0x5\r\n\r\nhello",
         weft=[400]),
    dict(name="CL overflow",
         raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 99999999999999999999999\r\n\r\n",
         weft=[400]),
    dict(name="CL with inner space", raw="POST / HTTP/1.1\r\n" + H + "Content-Length: 1 2\r\n\r\n",
         weft=[400]),
    dict(name="CL trailing whitespace is OWS",
         raw="GET / HTTP/1.1\r\n" + H + "Content-Length: 0 \r\n\r\n", weft=[200]),
    dict(name="space before colon: Content-Length",
         raw="POST / HTTP/1.1\r\n" + H + "Content-Length : 5\r\n\r\nhello", weft=[400]),
    # --- Smuggling: Transfer-Encoding.
    dict(name="CL.TE", raw="POST / HTTP/1.1\r\n" + H +
         "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX", weft=[400]),
    dict(name="TE.CL", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
         weft=[400]),
    dict(name="space before colon: Transfer-Encoding",
         raw="POST / HTTP/1.1\r\n" + H + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
         weft=[400]),
    dict(name="TE.TE xchunked", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", weft=[400], differs=TE_NOT_CHUNKED),
    dict(name="TE.TE chunked, identity", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", weft=[400], differs=TE_NOT_CHUNKED),
    dict(name="TE.TE identity", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: identity\r\n\r\n0\r\n\r\n", weft=[400], differs=TE_NOT_CHUNKED),
    dict(name="TE.TE tab before value", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n" + GET, weft=[405, 200],
         differs="a tab before the value is OWS (RFC 9110 5.6.3), so this is chunked: "
                 "http_server reads the chunked body (and answers POST with 405, as in 'POST with "
                 "Content-Length body'); nginx skips only spaces and answers 501 for the coding "
                 "'\\tchunked'. Both frame the message alike or refuse it: no smuggling"),
    dict(name="TE.TE tab in name", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n", weft=[400]),
    dict(name="TE.TE leading space line (obs-fold of Host)", raw="POST / HTTP/1.1\r\n" + H +
         " Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", weft=[400]),
    dict(name="TE.TE duplicate chunked", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", weft=[400]),
    dict(name="TE.TE gzip, chunked", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", weft=[501]),
    dict(name="TE.TE upper case CHUNKED", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n" + GET, weft=[405, 200],
         differs="405 for POST (coding names are case-insensitive: RFC 9112 7)"),
    dict(name="TE.TE vertical tab", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n", weft=[400],
         differs="a control character is not allowed in a field value (RFC 9110 5.5): 400; "
                 "nginx takes it as an unknown coding and answers 501. Both refuse and close"),
    dict(name="TE in HTTP/1.0", raw="POST / HTTP/1.0\r\n" +
         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", weft=[400]),
    # --- Chunked framing.
    dict(name="chunk data not followed by CRLF",
         raw="POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
         weft=[400]),
    dict(name="chunk-size overflow", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc\r\n0\r\n\r\n", weft=[400]),
    dict(name="chunk-size not hex", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", weft=[400]),
    dict(name="chunk-size with sign", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n", weft=[400]),
    dict(name="chunk-size bare LF", raw="POST / HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", weft=[400],
         differs="a chunk line ends in CRLF (RFC 9112 7.1); nginx accepts a bare LF there as it "
                 "does in the head (RFC 9112 2.2 allows either), http_server rejects it"),
    # --- Line endings and folding.
    dict(name="bare LF line endings", raw="GET / HTTP/1.1\nHost: t\n\n", weft=[400],
         differs="RFC 9112 2.2 lets a recipient accept a bare LF or reject it; http_server "
                 "rejects it, since a proxy that reads LF differently is a smuggling vector"),
    dict(name="bare LF in one header line", raw="GET / HTTP/1.1\r\nHost: t\nX: y\r\n\r\n",
         weft=[400],
         differs="as 'bare LF line endings': accepted by nginx, rejected here (RFC 9112 2.2)"),
    dict(name="bare CR", raw="GET / HTTP/1.1\r\nHost: t\rX: y\r\n\r\n", weft=[400]),
    dict(name="obs-fold", raw="GET / HTTP/1.1\r\n" + H + "X-A: a\r\n b\r\n\r\n", weft=[400]),
    dict(name="NUL in header value", raw="GET / HTTP/1.1\r\n" + H + "X-A: a\x00b\r\n\r\n",
         weft=[400]),
    # --- Host.
    dict(name="HTTP/1.1 without Host", raw="GET / HTTP/1.1\r\n\r\n", weft=[400]),
    dict(name="duplicate Host", raw="GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", weft=[400]),
    dict(name="empty Host", raw="GET / HTTP/1.1\r\nHost:\r\n\r\n", weft=[400]),
    dict(name="Host with a slash", raw="GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", weft=[400]),
    dict(name="Host with a port", raw="GET / HTTP/1.1\r\nHost: a.b:8080\r\n\r\n", weft=[200]),
    dict(name="Host IPv6 literal", raw="GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", weft=[200]),
    # --- Request line.
    dict(name="HTTP/2.0", raw="GET / HTTP/2.0\r\n" + H + "\r\n", weft=[505]),
    dict(name="HTTP/9.9", raw="GET / HTTP/9.9\r\n" + H + "\r\n", weft=[505]),
    dict(name="HTTP/1.2", raw="GET / HTTP/1.2\r\n" + H + "\r\n", weft=[505],
         differs="RFC 9110 2.5 lets a server answer a higher minor version as 1.1 (nginx does); "
                 "http_server answers only HTTP/1.0 and 1.1 and says so with 505 (RFC 9110 "
                 "15.6.6), which is allowed and never misreads a message"),
    dict(name="HTTP/0.9 request", raw="GET /\r\n\r\n", weft=[400],
         differs="nginx answers an HTTP/0.9 request with a bare body; RFC 9112 (Appendix C.1) no "
                 "longer requires 0.9 support and http_server answers 400"),
    dict(name="lower-case version", raw="GET / http/1.1\r\n" + H + "\r\n", weft=[400]),
    dict(name="two spaces in request line", raw="GET  / HTTP/1.1\r\n" + H + "\r\n", weft=[400],
         differs="RFC 9112 3: the request line is method SP target SP version, one SP each; "
                 "nginx tolerates extra spaces, http_server rejects them (RFC 9112 3 allows "
                 "either, strict is the safe one behind a proxy)"),
    dict(name="100 KB URI", raw="GET /" + "a" * 100000 + " HTTP/1.1\r\n" + H + "\r\n", weft=[414]),
    dict(name="space in target", raw="GET /a b HTTP/1.1\r\n" + H + "\r\n", weft=[400]),
    dict(name="space after the version", raw="GET / HTTP/1.1 \r\n" + H + "\r\n", weft=[400],
         differs="as 'two spaces in request line': nginx splits on whitespace, http_server "
                 "reads the grammar of RFC 9112 3 as it is"),
    dict(name="empty lines before the request", raw="\r\n\r\n" + GET, weft=[200]),
    # --- Upgrade and CONNECT: exactly one response, then the close.
    dict(name="Upgrade: websocket", raw="GET / HTTP/1.1\r\n" + H +
         "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" + GET, weft=[200],
         differs="both ignore the Upgrade (RFC 9110 7.8) and answer 200; http_server then "
                 "closes, since a client that asked to upgrade may follow with bytes of the "
                 "other protocol, and nginx goes on to the pipelined request"),
    dict(name="Upgrade: h2c", raw="GET / HTTP/1.1\r\n" + H +
         "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
         + GET, weft=[200],
         differs="as 'Upgrade: websocket': one 200, then the close"),
    dict(name="CONNECT", raw="CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n\r\n" + GET, weft=[405]),
]


def free_port():
    """A loopback port in 20000-31999 that nothing listens on right now."""
    for _ in range(200):
        port = random.randint(20000, 31999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port in 20000-31999")


def wait_listening(port, proc, what):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} is not listening on {port} after 20 s")


def start_nginx(nginx, prefix):
    port = free_port()
    conf = os.path.join(prefix, "nginx.conf")
    user = "user root;\n" if os.geteuid() == 0 else ""
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
{user}worker_processes 1;
error_log {prefix}/error.log info;
pid {prefix}/nginx.pid;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{ return 200 "Hello, World!"; }}
  }}
}}
""")
    proc = subprocess.Popen([nginx, "-p", prefix, "-c", conf], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(prefix, "stderr.log"), "w"))
    wait_listening(port, proc, "nginx")
    return proc, port


def start_weft(server):
    proc = subprocess.Popen([server, "--listen=127.0.0.1:0", "--workers=1"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on [0-9.]+:(\d+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"http_server did not say where it listens: {line!r}")
    return proc, int(m.group(1))


def exchange(port, raw):
    """Sends raw, half-closes, reads until the close or READ_BOUND; returns (bytes, closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=READ_BOUND)
    try:
        try:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close (and reset) before the whole case is written
        got = b""
        deadline = time.monotonic() + READ_BOUND
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                b = s.recv(65536)
            except socket.timeout:
                return got, False
            except ConnectionResetError:
                return got, True
            if not b:
                return got, True
            got += b
        return got, False
    finally:
        s.close()


def responses(data, raw):
    """The status codes of the responses in data, in order (0: bytes without a status line)."""
    methods = [m.group(1) for m in re.finditer(rb"(?:^|\r\n\r\n|\n\n)([A-Z]+) ", raw)]
    codes = []
    i = 0
    while i < len(data):
        if not data.startswith(b"HTTP/", i):
            codes.append(0)
            break
        end = data.find(b"\r\n\r\n", i)
        if end < 0:
            codes.append(-1)  # a truncated head
            break
        head = data[i:end].decode("latin-1")
        code = int(head.split(" ", 2)[1])
        codes.append(code)
        m = re.search(r"\r\ncontent-length:\s*(\d+)", head, re.I)
        is_head = len(codes) <= len(methods) and methods[len(codes) - 1] == b"HEAD"
        body = 0 if is_head or code in (204, 304) or code < 200 else int(m.group(1)) if m else 0
        i = end + 4 + body
    return codes


def klass(codes):
    return [c // 100 for c in codes]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="the http_server binary")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--table", action="store_true", help="print both servers' answers")
    args = ap.parse_args()
    if not os.access(args.nginx, os.X_OK):
        print(f"[  SKIPPED ] http_framing_diff: no nginx at {args.nginx} "
              "(scripts/install-deps.sh installs nginx-light)")
        return 77
    prefix = tempfile.mkdtemp(prefix="weft-nginx-")
    weft, weft_port = start_weft(args.server)
    nginx = None
    try:
        nginx, nginx_port = start_nginx(args.nginx, prefix)
        failures = []
        for case in CORPUS:
            raw = case["raw"].encode("latin-1")
            w_data, w_closed = exchange(weft_port, raw)
            n_data, n_closed = exchange(nginx_port, raw)
            w, n = responses(w_data, raw), responses(n_data, raw)
            differs = case.get("differs")
            if args.table:
                print(f"{case['name']:45} weft {w} {'closed' if w_closed else 'OPEN'}"
                      f"  nginx {n} {'closed' if n_closed else 'OPEN'}"
                      f"{'  (differs)' if differs else ''}")
            if w != case["weft"] or not w_closed:
                failures.append(f"{case['name']}: http_server answered {w} "
                                f"({'closed' if w_closed else 'not closed'}), expected "
                                f"{case['weft']} then a close; it sent {w_data[:300]!r}")
            same = klass(w) == klass(n)
            if not same and not differs:
                failures.append(f"{case['name']}: http_server answered {w}, nginx {n}: classes "
                                "differ and the corpus gives no reason")
            if same and differs:
                failures.append(f"{case['name']}: the corpus says the answers differ ({differs}) "
                                f"but both are of one class: http_server {w}, nginx {n}")
        if weft.poll() is not None:
            failures.append(f"http_server exited ({weft.returncode}) during the corpus")
        for f in failures:
            print("FAIL " + f)
        print(f"http_framing_diff: {len(CORPUS)} cases, {len(failures)} failures")
        return 1 if failures else 0
    finally:
        weft.kill()
        weft.wait()
        if nginx:
            nginx.kill()
            nginx.wait()
        shutil.rmtree(prefix, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
