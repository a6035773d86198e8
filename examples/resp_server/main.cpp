// resp_server: a Redis-protocol (RESP2) key-value server on weft, enough for redis-cli and
// redis-benchmark. One fiber per connection, pipelined commands answered in one write, keys in
// 64 mutex-guarded shards with lazy and active expiry.
//
//   resp_server --listen=127.0.0.1:6379 [--workers=N] [--proto_max_bulk_len=536870912]
//               [--client_query_buffer_limit=1073741824] [--max_multibulk_len=1048576]
//               [--timeout=300s] [--command_timeout=30s] [--maxclients=10000] [--drain_grace=1s]
//               [--write_timeout=30s] [--output_soft_limit=16384] [--output_hard_limit=33554432]
//   redis-cli -p 6379 set k v EX 10
//   redis-benchmark -p 6379 -t ping,set,get,incr,mset -n 100000 -c 50 -P 16 -q
//
// Commands: see resp_commands.hpp. Malformed input gets "-ERR Protocol error: ..." and the
// connection is closed, as Redis does; everyone else is served on. Hostile clients: the limits
// flags bound what one command may occupy in memory; a client that sends nothing for --timeout
// (Redis's `timeout`; Redis's default is 0, never, but then idle connections can hold every slot
// for good) is closed quietly, as Redis does; a command must arrive complete within
// --command_timeout of its first byte (a client trickling one, slowloris, gets "-ERR command not
// complete within ..." and a close); past --maxclients connections at once a client gets Redis's
// "-ERR max number of clients reached" and a close. --maxclients is lowered to fit the fd limit,
// keeping fds to refuse with (examples/common/connection_cap.hpp). Clients that do not read
// (examples/common/write_bounds.hpp): once --output_soft_limit bytes of replies are pending, the
// connection stops parsing and reading and writes them first; a client that takes none of its
// replies for --write_timeout is closed; a reply that takes the pending bytes past
// --output_hard_limit (a GET of a bigger value, a huge MGET) is replaced by "-ERR reply of N bytes
// is over the output buffer limit ..." and a close (Redis's client-output-buffer-limit). Prints
// "listening on HOST:PORT" once ready; SIGINT/SIGTERM drain it (weft::net::Server): it stops
// accepting, ends the connections (cancelled after --drain_grace if still busy) and exits.
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/time/time.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

#include "common/listen_announced.hpp"
#include "common/shutdown_signal.hpp"
#include "resp_server.hpp"

ABSL_FLAG(std::string, listen, "127.0.0.1:6379", "address to listen on, HOST:PORT");
ABSL_FLAG(int, workers, 0, "weft workers (0: all CPUs)");
ABSL_FLAG(absl::Duration, drain_grace, absl::Seconds(1),
          "on SIGINT/SIGTERM, how long connections may finish before they are cancelled");
ABSL_FLAG(std::uint64_t, proto_max_bulk_len, resp::Limits{}.max_bulk_len,
          "longest bulk string a client may send (Redis's proto-max-bulk-len)");
ABSL_FLAG(std::uint64_t, client_query_buffer_limit, resp::Limits{}.max_command_len,
          "most bytes one command may take (Redis's client-query-buffer-limit)");
ABSL_FLAG(std::uint64_t, max_multibulk_len, resp::Limits{}.max_array_len,
          "most arguments in one command");
ABSL_FLAG(absl::Duration, timeout, absl::FromChrono(resp::ServerOptions{}.timeout),
          "close a client that sends nothing for this long (Redis's timeout; 0: never)");
ABSL_FLAG(absl::Duration, command_timeout, absl::FromChrono(resp::ServerOptions{}.command_timeout),
          "a command must be complete within this of its first byte, else an error and a close "
          "(0: no limit)");
ABSL_FLAG(std::size_t, maxclients, resp::ServerOptions{}.maxclients,
          "connections served at once; past it '-ERR max number of clients reached' (Redis's "
          "maxclients; lowered to fit the fd limit; 0: as many as it allows)");

ABSL_FLAG(absl::Duration, write_timeout, absl::FromChrono(resp::ServerOptions{}.write_timeout),
          "close a client that takes none of its replies for this long (one that pipelines and "
          "never reads; 0: never)");
ABSL_FLAG(std::size_t, output_soft_limit, resp::ServerOptions{}.output_soft_limit,
          "bytes of replies pending after which a client's commands are not read or parsed until "
          "the replies are written");
ABSL_FLAG(std::size_t, output_hard_limit, resp::ServerOptions{}.output_hard_limit,
          "bytes of replies pending (the newest included) past which the client gets an error "
          "instead of the reply and is closed (Redis's client-output-buffer-limit; 0: no limit)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Redis-protocol (RESP2) key-value server on weft");
  absl::ParseCommandLine(argc, argv);
  examples::ShutdownSignal signals;  // before run(): worker threads inherit the signal mask
  resp::ServerOptions opts;
  opts.limits.max_bulk_len = absl::GetFlag(FLAGS_proto_max_bulk_len);
  opts.limits.max_command_len = absl::GetFlag(FLAGS_client_query_buffer_limit);
  opts.limits.max_array_len = absl::GetFlag(FLAGS_max_multibulk_len);
  opts.drain_grace = std::chrono::duration_cast<std::chrono::milliseconds>(
      absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_drain_grace)));
  opts.timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_timeout));
  opts.command_timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_command_timeout));
  opts.maxclients = absl::GetFlag(FLAGS_maxclients);
  opts.write_timeout = absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_write_timeout));
  opts.output_soft_limit = absl::GetFlag(FLAGS_output_soft_limit);
  opts.output_hard_limit = absl::GetFlag(FLAGS_output_hard_limit);
  weft::Options run_opts;
  run_opts.workers = static_cast<unsigned>(std::max(0, absl::GetFlag(FLAGS_workers)));
  int rc = 0;
  weft::run(
      [&] {
        std::optional<weft::net::TcpListener> l =
            examples::listen_announced("resp_server", absl::GetFlag(FLAGS_listen));
        if (!l) {
          rc = 1;
          return;
        }
        const weft::Chan<int> stop = signals.stop_channel("resp_server");
        resp::Store store;
        resp::serve(std::move(*l), stop, store, opts);
        std::printf("resp_server: stopped with %zu keys\n", store.size());
      },
      run_opts);
  return rc;
}
