// chat_server's line protocol, as pure code over bytes (no I/O, no weft runtime) so a fuzzer can
// drive it alone.
//
// A client sends lines ending in "\n" (a "\r" before it is dropped, so telnet and `nc -C` work).
// A line is a message to everyone, or a command:
//   /nick NAME     take a new name (1-32 of [A-Za-z0-9_-], unique)
//   /me ACTION     "* NAME ACTION"
//   /who           who is online
//   /quit          leave
//   /help          the list of commands
// A line longer than the limit is an error that ends the connection. Bytes that would upset a
// terminal (controls, escapes, invalid UTF-8) are replaced before anything is broadcast.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace chat {

inline constexpr std::size_t kDefaultMaxLine = 4096;

// Splits a byte stream into lines. feed() appends bytes; next() pops complete lines. A line
// whose content (without "\n" / "\r\n") exceeds max_line is kTooLong, detected as soon as the
// buffer holds more than that without a newline; after kTooLong the framer stays failed.
class LineFramer {
 public:
  enum class Next { kLine, kNeedMore, kTooLong };

  explicit LineFramer(std::size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  void feed(std::string_view bytes);
  // kLine: *line gets the next line, without its terminator.
  Next next(std::string* line);
  // Bytes held that are not yet part of a returned line.
  std::size_t buffered() const { return buf_.size() - begin_; }
  std::size_t max_line() const { return max_line_; }

 private:
  std::size_t max_line_;
  std::string buf_;
  std::size_t begin_ = 0;    // start of the first unreturned line
  std::size_t scanned_ = 0;  // bytes from begin_ known to hold no '\n'
  bool failed_ = false;
};

struct Command {
  enum class Kind { kEmpty, kMessage, kNick, kMe, kWho, kQuit, kHelp, kUnknown };
  Kind kind = Kind::kEmpty;
  std::string_view arg;  // kMessage: the line; kNick/kMe: the text after the command; kUnknown:
                         // the command word
};

// Classifies one line (already sanitized or not: it only looks at ASCII).
Command parse_line(std::string_view line);

// 1-32 characters of [A-Za-z0-9_-].
bool valid_nick(std::string_view nick);

// Makes text safe to show: valid UTF-8 stays (except C1 controls), tab becomes a space, other
// C0 controls, DEL, C1 controls and invalid UTF-8 sequences become '?'. The result is valid
// UTF-8 without control characters.
std::string sanitize(std::string_view text);

// Helpers for tests and fuzzers.
bool is_valid_utf8(std::string_view s);

}  // namespace chat
