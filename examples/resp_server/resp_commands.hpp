// resp_server's commands: one parsed command in, its RESP2 reply appended to a string. No I/O
// and no weft runtime (the command fuzzer links it alone).
//
// Data: PING ECHO GET SET (EX PX NX XX KEEPTTL GET) DEL EXISTS INCR DECR INCRBY DECRBY MGET MSET
// EXPIRE PEXPIRE (NX XX GT LT) TTL PTTL PERSIST KEYS DBSIZE FLUSHALL FLUSHDB.
// Connection and introspection, enough for redis-cli and redis-benchmark: QUIT SELECT(0) COMMAND
// (COUNT DOCS INFO LIST) CONFIG (GET RESETSTAT) CLIENT (SETNAME GETNAME ID SETINFO) INFO,
// HELLO (protocol 2 only: HELLO 3 gets NOPROTO).
// Errors use Redis's texts ("ERR unknown command 'x', with args beginning with: ...",
// "ERR wrong number of arguments for 'get' command", ...).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "resp_store.hpp"

namespace resp {

// Per-connection state.
struct Session {
  std::uint64_t id = 0;
  std::string name;          // CLIENT SETNAME
  bool close_after = false;  // QUIT: close once the reply is written
};

// Runs one command (args non-empty) and appends its reply to *out.
void execute(Store& store, std::span<const std::string_view> args, Session& session,
             std::string* out);

// Reply encoders.
void append_simple(std::string* out, std::string_view s);  // +s
void append_error(std::string* out, std::string_view s);   // -s (CR/LF replaced by spaces)
void append_int(std::string* out, std::int64_t v);         // :v
void append_bulk(std::string* out, std::string_view s);    // $len s
void append_nil(std::string* out);                         // $-1
void append_array_header(std::string* out, std::size_t n);

}  // namespace resp
