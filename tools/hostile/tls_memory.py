#!/usr/bin/env python3
"""TLS memory before the handshake: the server's VmRSS per silent TCP connection and per
half-done handshake on its TLS port.

  tools/hostile/tls_memory.py --server=BUILD/examples/http_server/http_server [--conns=5000]

Starts the server with a throwaway certificate (openssl req), then
  1. opens --conns TCP connections that never send a byte, and
  2. opens --conns connections that send a ClientHello (made by Python's ssl module over a
     MemoryBIO) and never answer the server's reply,
reading the server's VmRSS before and after each step. A half-done handshake counts only once the
server has answered its ClientHello (its first flight is read back on every connection), so the
figure is the server's state while it waits for the client's second flight; then a pause, so parked
fibers have hibernated (the runtime's default hibernate_after is 1 s). Prints KB per connection for
each. The certificate is ECDSA P-256, as tools/bench/compare's TLS benches use.
The server's --max_conns and --tls_handshake_timeout are raised so that neither cuts the run.
"""
import argparse, os, resource, socket, ssl, subprocess, sys, tempfile, time


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def client_hello():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--conns", type=int, default=5000)
    ap.add_argument("--port", type=int, default=18443)
    ap.add_argument("--settle", type=float, default=3.0)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < 2 * a.conns + 100:
        sys.exit(f"needs {2 * a.conns + 100} fds, the hard limit is {hard}")
    d = tempfile.mkdtemp()
    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    srv = subprocess.Popen([a.server, f"--listen=127.0.0.1:{a.port}", f"--tls-cert={cert}", f"--tls-key={key}",
                            f"--max_conns={3 * a.conns}", "--tls_handshake_timeout=600s"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", a.port)).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(a.settle)
        base = rss_kb(srv.pid)
        silent = [socket.create_connection(("127.0.0.1", a.port)) for _ in range(a.conns)]
        time.sleep(a.settle)
        after_silent = rss_kb(srv.pid)
        hello = client_hello()
        half = []
        for _ in range(a.conns):
            s = socket.create_connection(("127.0.0.1", a.port))
            s.sendall(hello)
            half.append(s)
        unanswered = 0
        for s in half:  # the server's flight (ServerHello ...) proves it processed the hello
            s.settimeout(60)
            try:
                if not s.recv(1):
                    unanswered += 1
            except OSError:
                unanswered += 1
        if unanswered:
            sys.exit(f"{unanswered} of {a.conns} half-done handshakes got no answer from the server")
        time.sleep(a.settle)
        after_half = rss_kb(srv.pid)
        print(f"baseline VmRSS {base} KB")
        print(f"silent TCP connections: {a.conns}, VmRSS +{after_silent - base} KB = "
              f"{(after_silent - base) * 1024 / a.conns / 1024:.2f} KB each")
        print(f"half-done handshakes (ClientHello sent, never answered): {a.conns}, VmRSS "
              f"+{after_half - after_silent} KB = "
              f"{(after_half - after_silent) / a.conns:.2f} KB each")
        for s in silent + half:
            s.close()
    finally:
        srv.terminate()
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
