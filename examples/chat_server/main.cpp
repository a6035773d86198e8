// chat_server: a line-based chat room on weft, usable with nc or telnet.
//
//   chat_server --listen=127.0.0.1:7070 [--workers=N] [--max_line=4096]
//               [--out_queue_bytes=262144] [--line_timeout=30s] [--idle_timeout=1h]
//               [--max_conns=10000] [--flush_timeout=2s] [--write_timeout=30s]
//               [--drain_grace=1s]
//   nc 127.0.0.1 7070
//
// Every line a client sends goes to everyone as "<nick> line"; /nick NAME, /me ACTION, /who,
// /quit and /help are commands (see chat/chat_protocol.hpp). One hub fiber owns the room and
// hears joins, leaves and lines on a channel; each client has a reader fiber and a writer fiber
// draining a channel bounded in bytes (--out_queue_bytes), and a client too slow to keep up is
// dropped. A line longer than
// --max_line ends its connection with an error; control bytes and invalid UTF-8 are replaced.
// Hostile clients: a line must be complete within --line_timeout of its first byte (a client that
// trickles a line, slowloris, is dropped); a client that sends nothing at all for --idle_timeout is
// dropped (silent listeners are normal here, so the default is an hour, and any line resets it,
// an empty one too, which the room ignores: a keep-alive); past --max_conns clients at once a
// newcomer is told "! the server is full (N clients); try again later" and closed. --max_conns
// is lowered to fit the fd limit, keeping fds to refuse with (examples/common/connection_cap.hpp).
// A client that takes none of the bytes written to it for --write_timeout is dropped
// (examples/common/write_bounds.hpp), so one that never reads is gone even in a quiet room;
// --out_queue_bytes is its output's hard limit.
// Each drop is said to the client in a "! ..." line (if it can be written within --flush_timeout
// of the leave), and to the room as "* NICK left (why)".
// Prints "listening on HOST:PORT" once ready; SIGINT/SIGTERM drain it (weft::net::Server): it stops
// accepting, ends the connections (cancelled after --drain_grace if still busy) and exits.
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/time/time.h>

#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

#include "chat_server/chat_server.hpp"
#include "common/listen_announced.hpp"
#include "common/shutdown_signal.hpp"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070", "address to listen on, HOST:PORT");
ABSL_FLAG(int, workers, 0, "weft workers (0: all CPUs)");
ABSL_FLAG(absl::Duration, drain_grace, absl::Seconds(1),
          "on SIGINT/SIGTERM, how long connections may finish before they are cancelled");
ABSL_FLAG(std::size_t, max_line, chat::kDefaultMaxLine,
          "longest line a client may send, in bytes; longer ends the connection");
ABSL_FLAG(std::size_t, out_queue_bytes, chat::ServerOptions{}.out_queue_bytes,
          "bytes queued for a client (each line counts 64 more) before it counts as too slow and "
          "is dropped; a longer line is still queued when nothing else is");
ABSL_FLAG(absl::Duration, line_timeout, absl::FromChrono(chat::ServerOptions{}.line_timeout),
          "a line must be complete within this of its first byte, else the client is dropped "
          "(0: no limit)");
ABSL_FLAG(absl::Duration, idle_timeout, absl::FromChrono(chat::ServerOptions{}.idle_timeout),
          "a client that sends nothing, not even an empty line, for this long is dropped "
          "(0: never)");
ABSL_FLAG(absl::Duration, flush_timeout, absl::FromChrono(chat::ServerOptions{}.flush_timeout),
          "how long a leaving client's last lines (its \"! ...\" reason, \"* bye\") may take to be "
          "written before the connection is closed without them");
ABSL_FLAG(std::size_t, max_conns, chat::ServerOptions{}.max_conns,
          "clients served at once; past it a client is told the server is full (lowered to fit "
          "the fd limit; 0: as many as it allows)");

ABSL_FLAG(absl::Duration, write_timeout, absl::FromChrono(chat::ServerOptions{}.write_timeout),
          "drop a client that takes none of the bytes written to it for this long (one that "
          "never reads; 0: never)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("line-based chat server on weft (try: nc HOST PORT)");
  absl::ParseCommandLine(argc, argv);
  examples::ShutdownSignal signals;  // before run(): worker threads inherit the signal mask
  chat::ServerOptions opts;
  opts.max_line = absl::GetFlag(FLAGS_max_line);
  opts.out_queue_bytes = absl::GetFlag(FLAGS_out_queue_bytes);
  opts.drain_grace = std::chrono::duration_cast<std::chrono::milliseconds>(
      absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_drain_grace)));
  opts.line_timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_line_timeout));
  opts.idle_timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_idle_timeout));
  opts.max_conns = absl::GetFlag(FLAGS_max_conns);
  opts.flush_timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_flush_timeout));
  opts.write_timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_write_timeout));
  weft::Options run_opts;
  run_opts.workers = static_cast<unsigned>(std::max(0, absl::GetFlag(FLAGS_workers)));
  int rc = 0;
  weft::run(
      [&] {
        std::optional<weft::net::TcpListener> l =
            examples::listen_announced("chat_server", absl::GetFlag(FLAGS_listen));
        if (!l) {
          rc = 1;
          return;
        }
        const weft::Chan<int> stop = signals.stop_channel("chat_server");
        chat::run_chat_server(std::move(*l), stop, opts);
      },
      run_opts);
  return rc;
}
