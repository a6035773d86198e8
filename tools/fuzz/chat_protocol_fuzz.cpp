// libFuzzer target: examples/chat_server's line protocol (chat_protocol.cpp).
//
// Input: one control byte (chunking seed, line limit), then a client's bytes. Checks:
//   - framing all at once and in random chunks gives the same lines and the same verdict;
//   - no line is longer than the limit or holds '\n'; the lines plus their terminators are a
//     prefix of the input;
//   - sanitize() gives valid UTF-8 without control bytes, and is idempotent;
//   - parse_line() returns an argument that lies inside the line.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_protocol.hpp"
#include "fuzz_util.hpp"

namespace {

struct Framed {
  std::vector<std::string> lines;
  bool too_long = false;
};

Framed frame(std::string_view input, std::size_t max_line, fuzz::Rng* rng) {
  chat::LineFramer f(max_line);
  Framed out;
  std::string line;
  std::size_t fed = 0;
  while (fed < input.size()) {
    const std::size_t n =
        rng ? std::min(rng->chunk(input.size()), input.size() - fed) : input.size() - fed;
    f.feed(input.substr(fed, n));
    fed += n;
    for (;;) {
      const chat::LineFramer::Next r = f.next(&line);
      if (r == chat::LineFramer::Next::kLine) {
        FUZZ_CHECK(line.size() <= max_line);
        FUZZ_CHECK(line.find('\n') == std::string::npos);
        out.lines.push_back(line);
        continue;
      }
      if (r == chat::LineFramer::Next::kTooLong) {
        out.too_long = true;
        return out;
      }
      break;
    }
  }
  return out;
}

bool clean(std::string_view s) {
  if (!chat::is_valid_utf8(s)) return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t ctl = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t max_line = (ctl & 0x80) ? 16 + (ctl & 0x3f) : chat::kDefaultMaxLine;
  const Framed whole = frame(input, max_line, nullptr);
  fuzz::Rng rng(ctl);
  const Framed chunked = frame(input, max_line, &rng);
  FUZZ_CHECK(whole.lines == chunked.lines);
  FUZZ_CHECK(whole.too_long == chunked.too_long);
  // The lines are the input's, in order: each followed by "\n" or "\r\n".
  std::size_t pos = 0;
  for (const std::string& l : whole.lines) {
    FUZZ_CHECK(input.substr(pos, l.size()) == l);
    pos += l.size();
    if (pos < input.size() && input[pos] == '\r') ++pos;
    FUZZ_CHECK(pos < input.size() && input[pos] == '\n');
    ++pos;
  }
  for (const std::string& l : whole.lines) {
    const std::string s = chat::sanitize(l);
    FUZZ_CHECK(clean(s));
    FUZZ_CHECK(chat::sanitize(s) == s);
    const chat::Command c = chat::parse_line(s);
    if (!c.arg.empty()) {
      FUZZ_CHECK(c.arg.data() >= s.data() && c.arg.data() + c.arg.size() <= s.data() + s.size());
    }
    if (c.kind == chat::Command::Kind::kNick && chat::valid_nick(c.arg)) {
      FUZZ_CHECK(clean(c.arg) && c.arg.size() <= 32);
    }
  }
  // sanitize() on raw bytes, newlines and all.
  const std::string s = chat::sanitize(input);
  FUZZ_CHECK(clean(s));
  return 0;
}
