// chat_server: a line-based chat room on weft, usable with nc or telnet.
//
//   chat_server --listen=127.0.0.1:7070 [--workers=N] [--max_line=4096] [--out_queue=256]
//   nc 127.0.0.1 7070
//
// Every line a client sends goes to everyone as "<nick> line"; /nick NAME, /me ACTION, /who,
// /quit and /help are commands (see chat/chat_protocol.hpp). One hub fiber owns the room and
// hears joins, leaves and lines on a channel; each client has a reader fiber and a writer fiber
// draining a bounded channel, and a client too slow to keep up is dropped. A line longer than
// --max_line ends its connection with an error; control bytes and invalid UTF-8 are replaced.
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
ABSL_FLAG(std::size_t, out_queue, chat::ServerOptions{}.out_queue,
          "lines queued for a client before it counts as too slow and is dropped");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("line-based chat server on weft (try: nc HOST PORT)");
  absl::ParseCommandLine(argc, argv);
  examples::ShutdownSignal signals;  // before run(): worker threads inherit the signal mask
  chat::ServerOptions opts;
  opts.max_line = absl::GetFlag(FLAGS_max_line);
  opts.out_queue = std::max<std::size_t>(1, absl::GetFlag(FLAGS_out_queue));
  opts.drain_grace = std::chrono::duration_cast<std::chrono::milliseconds>(
      absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_drain_grace)));
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
