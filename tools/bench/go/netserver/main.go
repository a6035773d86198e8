// Go servers for the network benches of tools/bench/compare (echo, http, idle_conns), written the
// way Go servers are usually written: one goroutine per connection, blocking-style calls, the
// runtime's netpoller underneath. A program of its own (not a mode of ../main.go) so that the
// net/http package does not sit in the memory benches' process.
//
//	--bench-server=echo  accept loop; per connection a goroutine with a 512-byte buffer:
//	                     conn.Read, conn.Write what was read, until EOF or an error
//	--bench-server=http  net/http: "Hello, World!" (text/plain) at "/", HTTP/1.1 keep-alive;
//	                     with --tls-cert=FILE --tls-key=FILE over TLS (http.Server.ServeTLS,
//	                     crypto/tls defaults), as the HTTPS and idle-TLS benches run it
//
// --listen=HOST:PORT (port 0: the kernel picks; the line "listening on HOST:PORT" gives the real
// one once connections are accepted), --workers=N sets GOMAXPROCS (0: all CPUs). SIGTERM or SIGINT
// closes the listener and exits with status 0. The harness reads the server's RSS from
// /proc/PID/status itself, so nothing here reports memory.
//
// Build: cd tools/bench/go && go build -o OUT ./netserver
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

var (
	modeFlag    = flag.String("bench-server", "", "echo or http")
	listenFlag  = flag.String("listen", "127.0.0.1:0", "address to listen on, HOST:PORT")
	workersFlag = flag.Int("workers", 0, "GOMAXPROCS; 0 means all CPUs")
	certFlag    = flag.String("tls-cert", "", "http: serve HTTPS with this certificate (PEM)")
	keyFlag     = flag.String("tls-key", "", "the private key (PEM) of --tls-cert")
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "netserver: "+format+"\n", args...)
	os.Exit(1)
}

func serveEcho(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096) // as a user writes it; the same size as weft's echo_server
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a reset: nothing to report per connection
		}
	}
}

func hello(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "Hello, World!")
}

func main() {
	flag.Parse()
	if flag.NArg() != 0 {
		fail("unexpected argument: %s", flag.Arg(0))
	}
	if *workersFlag < 0 {
		fail("--workers must not be negative")
	}
	if *workersFlag > 0 {
		runtime.GOMAXPROCS(*workersFlag)
	}
	if *modeFlag != "echo" && *modeFlag != "http" {
		fail("--bench-server must be echo or http, not %q", *modeFlag)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	// SIGUSR1: return the freed heap to the OS now (tools/bench/compare sends it before it reads
	// an idle server's RSS, so that Go shows its idle best, as weft does with hibernated stacks).
	free := make(chan os.Signal, 1)
	signal.Notify(free, syscall.SIGUSR1)
	go func() {
		for range free {
			debug.FreeOSMemory()
		}
	}()

	l, err := net.Listen("tcp", *listenFlag)
	if err != nil {
		fail("%v", err)
	}
	fmt.Printf("listening on %s\n", l.Addr())
	os.Stdout.Sync()

	done := make(chan error, 1)
	switch *modeFlag {
	case "echo":
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						done <- nil
						return
					}
					// EMFILE and the like: say so and go on, as the weft server does.
					fmt.Fprintln(os.Stderr, "netserver: accept:", err)
					continue
				}
				go serveEcho(c)
			}
		}()
	case "http":
		mux := http.NewServeMux()
		mux.HandleFunc("/", hello)
		srv := &http.Server{Handler: mux}
		go func() {
			var err error
			if *certFlag != "" {
				err = srv.ServeTLS(l, *certFlag, *keyFlag)
			} else {
				err = srv.Serve(l)
			}
			if errors.Is(err, net.ErrClosed) {
				err = nil
			}
			done <- err
		}()
	}
	select {
	case <-sigs:
		l.Close()
		os.Exit(0)
	case err := <-done:
		if err != nil {
			fail("%v", err)
		}
	}
}
