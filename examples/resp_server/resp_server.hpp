// resp_server's network side, as a library the tests call in-process: one fiber per connection
// reading into a buffer, parsing every complete command in it (pipelining), running them in order
// and writing all their replies with one write; a Ticker fiber for active expiry.
//
// Against idle and slow clients (examples/common/read_timeouts.hpp, connection_cap.hpp): a
// client that sends nothing for `timeout` is closed, quietly, as Redis's `timeout` does (Redis's
// default is 0, never; here 300 s, so that connections left idle cannot hold the slots for
// good); a command must arrive complete within command_timeout of its first byte (Redis has no
// such bound; without it a client trickling a command, slowloris, holds its connection forever),
// else "-ERR command not complete within ..." and a close; past `maxclients` connections at once
// a client gets Redis's "-ERR max number of clients reached" and a close.
//
// Against clients that do not read (examples/common/write_bounds.hpp): a connection writes its
// own replies, so once output_soft_limit bytes of replies are pending it stops parsing and
// reading and writes them first (a pipelining client that does not read is not read either); a
// client that takes none of them for write_timeout is closed (Redis's `timeout` counts such a
// client as idle); a reply that would take the pending bytes past output_hard_limit (a GET of a
// value that large, a huge MGET) is replaced by "-ERR reply of N bytes is over the output buffer
// limit ..." and the connection closed, as Redis's client-output-buffer-limit closes a client
// (Redis's default for normal clients is no limit; one here bounds what a client that never
// reads can pin).
#pragma once

#include <chrono>
#include <cstddef>
#include <weft/chan.hpp>
#include <weft/net.hpp>

#include "resp_parser.hpp"
#include "resp_store.hpp"

namespace resp {

struct ServerOptions {
  Limits limits;
  // Active expiry: every sweep_every, remove up to sweep_budget expired keys per shard.
  std::chrono::milliseconds sweep_every{100};
  std::size_t sweep_budget = 256;
  // At stop, how long commands in flight may finish before the connections are cancelled
  // (weft::net::Server::drain). Zero: every connection ends at once.
  std::chrono::milliseconds drain_grace{0};
  // Redis's `timeout`: a client idle this long (no byte received) is closed; zero: never.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // A command must be complete within this of its first byte; zero: no bound.
  std::chrono::milliseconds command_timeout = std::chrono::seconds(30);
  // Redis's maxclients: connections served at once (lowered to fit the fd limit; 0: as many as
  // it allows).
  std::size_t maxclients = 10000;
  // A client that takes none of its replies for this long is closed; zero: never.
  std::chrono::milliseconds write_timeout = std::chrono::seconds(30);
  // Pending reply bytes past which a connection stops reading and writes them (Redis's reply
  // buffer is 16 KiB too).
  std::size_t output_soft_limit = 16 * 1024;
  // Pending reply bytes (the newest reply included) past which the client gets an error instead
  // of that reply and is closed; zero: no limit. High enough for a GET of a 32 MiB value.
  std::size_t output_hard_limit = 32 << 20;
};

// Serves RESP clients on `listener` (needs a fiber) through weft::net::Server until `stop`
// yields a value or is closed; then drains: stops accepting, lets commands in flight finish for
// up to opts.drain_grace, cancels every connection (a blocked read or write fails) and returns
// once all connection fibers are gone. The listener is closed on return.
void serve(weft::net::TcpListener listener, weft::Chan<int> stop, Store& store,
           const ServerOptions& opts = {});

}  // namespace resp
