// chat_server's network side, as a library the tests call in-process.
//
// Go's shape: the state (who is online, their names) belongs to one hub fiber, and everyone else
// talks to it over a channel, so there is no lock. Per client, a reader fiber turns lines into
// events for the hub, and a writer fiber drains the client's bounded outgoing channel onto the
// socket. The hub only ever try_send()s to a client: a client whose queue is full (it does not
// read) is dropped, so one slow reader never stalls the hub or anyone else.
#pragma once

#include <chrono>
#include <cstddef>
#include <weft/chan.hpp>
#include <weft/net.hpp>

#include "chat_protocol.hpp"

namespace chat {

struct ServerOptions {
  std::size_t max_line = kDefaultMaxLine;  // longer lines end the connection
  std::size_t out_queue = 1024;            // lines queued for a client before it is dropped
  // How long a leaving client's writer may take to flush its last lines.
  std::chrono::milliseconds flush_timeout{2000};
  // At stop, how long the clients may take to leave before their sockets are cancelled (they
  // are told to leave at once; this bounds a writer still flushing to a slow reader).
  std::chrono::milliseconds drain_grace{1000};
};

// Serves chat clients on `listener` (needs a fiber) through weft::net::Server until `stop`
// yields a value or is closed; then drains: stops accepting, ends every connection (cancelled
// after opts.drain_grace if still busy) and returns once all client fibers are gone.
void run_chat_server(weft::net::TcpListener listener, weft::Chan<int> stop,
                     const ServerOptions& opts = {});

}  // namespace chat
