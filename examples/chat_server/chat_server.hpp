// chat_server's network side, as a library the tests call in-process.
//
// Go's shape: the state (who is online, their names) belongs to one hub fiber, and everyone else
// talks to it over a channel, so there is no lock. Per client, a reader fiber turns lines into
// events for the hub, and a writer fiber drains the client's outgoing channel onto the socket.
// The hub never blocks on a client: a client whose queue holds more than
// ServerOptions::out_queue_bytes (it does not read) is dropped, so one slow reader never stalls
// the hub or anyone else, and the memory one holds is bounded in bytes, whatever the lines.
//
// Against idle and slow clients (examples/common/read_timeouts.hpp, connection_cap.hpp): a client
// that has sent part of a line must finish it within line_timeout of its first byte; a client that
// sends nothing at all for idle_timeout is told so and dropped (listening in silence is normal in
// a chat, so the default is generous, and any line counts, an empty one too: the room ignores
// empty lines, so a client can send one now and then to stay); at most max_conns clients at once,
// past that a client is told the server is full and closed. Each is said to the client in a line
// starting with "! " before the close.
//
// Against clients that do not read (examples/common/write_bounds.hpp): out_queue_bytes is the
// hard limit of a client's output (past it the client is dropped, above), and a client whose
// writer gets none of its bytes taken for write_timeout is dropped too, so a member that never
// reads is gone within write_timeout even in a quiet room, and no writer stays blocked for good.
// The budget's soft limit has no use here: a client's queue is filled by the others' lines, so
// not reading it would not slow its growth.
#pragma once

#include <chrono>
#include <cstddef>
#include <weft/chan.hpp>
#include <weft/net.hpp>

#include "chat_protocol.hpp"

namespace chat {

// What a queued line costs beyond its bytes: its slot in the client's channel and its heap
// block's header and rounding.
inline constexpr std::size_t kLineOverhead = 64;

struct ServerOptions {
  std::size_t max_line = kDefaultMaxLine;  // longer lines end the connection
  // Bytes of lines queued for a client before it counts as too slow and is dropped: each line
  // counts its length plus kLineOverhead. A line longer than the whole budget is still queued
  // when nothing else is (a /who of a large room), so every client gets its replies.
  std::size_t out_queue_bytes = 256 * 1024;
  // How long a leaving client's writer may take to flush its last lines.
  std::chrono::milliseconds flush_timeout{2000};
  // At stop, how long the clients may take to leave before their sockets are cancelled (they
  // are told to leave at once; this bounds a writer still flushing to a slow reader).
  std::chrono::milliseconds drain_grace{1000};
  // A line must be complete within this of its first byte; zero: no bound.
  std::chrono::milliseconds line_timeout = std::chrono::seconds(30);
  // A client that sends nothing (not even an empty line) for this long is dropped; zero: never.
  std::chrono::milliseconds idle_timeout = std::chrono::hours(1);
  // Clients served at once (lowered to fit the fd limit; 0: as many as it allows).
  std::size_t max_conns = 10000;
  // A client that takes none of the bytes written to it for this long is dropped; zero: never.
  std::chrono::milliseconds write_timeout = std::chrono::seconds(30);
};

// Serves chat clients on `listener` (needs a fiber) through weft::net::Server until `stop`
// yields a value or is closed; then drains: stops accepting, ends every connection (cancelled
// after opts.drain_grace if still busy) and returns once all client fibers are gone.
void run_chat_server(weft::net::TcpListener listener, weft::Chan<int> stop,
                     const ServerOptions& opts = {});

}  // namespace chat
