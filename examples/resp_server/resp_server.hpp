// resp_server's network side, as a library the tests call in-process: one fiber per connection
// reading into a buffer, parsing every complete command in it (pipelining), running them in order
// and writing all their replies with one write; a Ticker fiber for active expiry.
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
};

// Serves RESP clients on `listener` (needs a fiber) until `stop` yields a value or is closed;
// then stops accepting, ends every connection (a blocked read or write fails at once) and
// returns once all connection fibers are gone. The listener is closed on return.
void serve(weft::net::TcpListener listener, weft::Chan<int> stop, Store& store,
           const ServerOptions& opts = {});

}  // namespace resp
