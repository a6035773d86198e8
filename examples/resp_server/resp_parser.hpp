// An incremental RESP2 request parser (the Redis protocol), as Redis's own processMultibulkBuffer
// and processInlineBuffer: arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") and inline
// commands ("GET k\r\n", what telnet and nc send, with Redis's quoting rules). Pure code over
// bytes, no I/O and no weft runtime, so a fuzzer can link it alone.
//
// Incremental: the parser keeps its place inside a partly received command, so a command that
// arrives a byte at a time costs O(its size) in total, not O(size^2). Contract:
//
//   resp::Parser p;
//   for (;;) {                                       // buf: the unconsumed bytes, in order
//     Result r = p.parse(buf);
//     ... kCommand: use p.args() (views into buf, or into the parser for quoted inline args)
//     buf.drop_front(p.consumed());                  // always, whatever r is
//     if (r != kCommand) break;                      // kNeedMore: read more, append, parse again
//   }                                                // kError: reply p.error(), close
//
// Every limit breach is a kError whose error() is the text after "-ERR Protocol error: ", the
// same texts as Redis. After kError the parser is finished (the connection should close);
// reset() makes it usable again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resp {

struct Limits {
  // Longest bulk string (Redis's proto-max-bulk-len).
  std::size_t max_bulk_len = std::size_t{512} << 20;
  // Most elements in one array command (Redis allows 1024*1024 before authentication).
  std::size_t max_array_len = std::size_t{1} << 20;
  // Longest inline command line, and longest "*N" / "$N" header line (Redis's
  // PROTO_INLINE_MAX_SIZE).
  std::size_t max_inline_len = std::size_t{64} << 10;
  // Most bytes one command may occupy in the input (Redis's client-query-buffer-limit).
  std::size_t max_command_len = std::size_t{1} << 30;
};

class Parser {
 public:
  enum class Result { kCommand, kNeedMore, kError };

  explicit Parser(Limits limits = {}) : limits_(limits) {}

  // Parses the next command at the front of `buf`. See the contract above: after every call the
  // caller drops consumed() bytes from the front of its buffer, and the next call gets what is
  // left followed by any bytes that arrived since. Empty commands ("*0\r\n", blank inline lines)
  // are consumed silently, as Redis does.
  Result parse(std::string_view buf);

  // kCommand: the command's arguments, valid until the caller's buffer changes or the next call.
  std::span<const std::string_view> args() const { return args_; }
  // Bytes at the front of the last call's buf that are done with (a whole command, skipped empty
  // commands): the caller drops them.
  std::size_t consumed() const { return consumed_; }
  // kError: what was wrong, e.g. "invalid bulk length".
  const std::string& error() const { return error_; }
  // kNeedMore: a lower bound on the bytes the command in progress still needs beyond what the
  // last call saw (1 when unknown). Lets a server size its read buffer for a large bulk string.
  std::size_t bytes_wanted() const { return wanted_; }
  // Forgets any partial command and any error.
  void reset();

  const Limits& limits() const { return limits_; }

 private:
  enum class Kind { kNone, kInline, kArray };
  Result parse_inline(std::string_view cmd);
  Result parse_multibulk(std::string_view cmd);
  // Finds the "\r\n" ending the header line that starts at `from` (the search resumes at
  // scanned_). Returns the index of '\r', or nullopt with result_ set to kNeedMore or kError.
  std::optional<std::size_t> find_crlf(std::string_view cmd, std::size_t from, const char* too_big);
  Result fail(std::string msg);
  // The command ends at cmd[end]: fills args_ and readies the parser for the next one.
  Result finish(std::string_view cmd, std::size_t end);

  Limits limits_;
  // The command in progress; offsets are relative to its first byte.
  Kind kind_ = Kind::kNone;
  bool in_array_header_done_ = false;
  std::int64_t remaining_ = 0;  // array elements still to parse
  std::int64_t bulk_len_ = -1;  // length of the bulk being read; -1: its "$N" header is next
  std::size_t pos_ = 0;         // first byte not yet parsed
  std::size_t scanned_ = 0;     // header line bytes already searched for "\r"
  std::vector<std::pair<std::size_t, std::size_t>> spans_;  // (offset, length) per argument
  std::vector<std::string> inline_args_;                    // unescaped inline arguments
  std::vector<std::string_view> args_;
  std::size_t command_len_ = 0;  // of the command finish() completed
  std::size_t consumed_ = 0;
  std::size_t wanted_ = 1;
  Result result_ = Result::kNeedMore;
  std::string error_;
  bool failed_ = false;
};

// Redis's string2ll: an optional '-' and decimal digits, no leading zeros (except "0" itself), no
// spaces or '+', within int64. What INCR, EXPIRE and the protocol's lengths accept.
std::optional<std::int64_t> parse_int64(std::string_view s);

// Redis's sdssplitargs: splits an inline command line into arguments. Whitespace separates
// arguments; "double quotes" take C-style escapes (\n \r \t \b \a \\ \" \xHH); 'single quotes'
// take only \'; a closing quote must be followed by whitespace or the end. nullopt: unbalanced
// quotes.
std::optional<std::vector<std::string>> split_inline_args(std::string_view line);

}  // namespace resp
