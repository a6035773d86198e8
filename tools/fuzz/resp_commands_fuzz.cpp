// libFuzzer target: examples/resp_server's commands (resp_commands.cpp) and store
// (resp_store.cpp, with its glob matcher), driven through the parser as the server drives them.
//
// Input: one control byte (how far the fake clock moves per command), then a client's bytes.
// Every command must append exactly one well-formed RESP2 reply (error lines without CR/LF,
// bulk lengths that match), and active expiry (sweep) must agree with lazy expiry: after a sweep
// at time T no key that expired by T is left.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "resp_commands.hpp"
#include "resp_parser.hpp"
#include "resp_store.hpp"

namespace {

std::int64_t g_now = 0;
std::int64_t fake_now() { return g_now; }

constexpr std::size_t kBad = std::string_view::npos;

// The end of the one reply starting at pos, or kBad if it is malformed.
std::size_t reply_end(std::string_view s, std::size_t pos, int depth) {
  if (pos >= s.size() || depth > 3) return kBad;
  const std::size_t eol = s.find("\r\n", pos);
  if (eol == kBad) return kBad;
  const std::string_view line = s.substr(pos + 1, eol - pos - 1);
  switch (s[pos]) {
    case '+':
    case '-':
      return line.find_first_of("\r\n") == kBad ? eol + 2 : kBad;
    case ':':
      return resp::parse_int64(line) ? eol + 2 : kBad;
    case '$': {
      const std::optional<std::int64_t> n = resp::parse_int64(line);
      if (!n || *n < -1) return kBad;
      if (*n == -1) return eol + 2;
      const std::size_t end = eol + 2 + static_cast<std::size_t>(*n);
      if (end + 2 > s.size() || s.substr(end, 2) != "\r\n") return kBad;
      return end + 2;
    }
    case '*': {
      const std::optional<std::int64_t> n = resp::parse_int64(line);
      if (!n || *n < 0) return kBad;
      std::size_t p = eol + 2;
      for (std::int64_t i = 0; i < *n; ++i) {
        p = reply_end(s, p, depth + 1);
        if (p == kBad) return kBad;
      }
      return p;
    }
    default:
      return kBad;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t ctl = data[0];
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  g_now = 1'000'000;
  resp::Store store(&fake_now);
  resp::Session session;
  resp::Limits limits;
  limits.max_array_len = 256;  // keeps single inputs cheap; the parser fuzzer covers the rest
  resp::Parser parser(limits);
  std::string out;
  for (int n = 0; n < 512; ++n) {
    const resp::Parser::Result r = parser.parse(input);
    if (r != resp::Parser::Result::kCommand) break;
    const std::size_t before = out.size();
    resp::execute(store, parser.args(), session, &out);
    FUZZ_CHECK(out.size() > before);
    FUZZ_CHECK(reply_end(out, before, 0) == out.size());
    input.remove_prefix(parser.consumed());
    if (session.close_after) break;
    g_now += ctl & 0x7f;
    if (ctl & 0x80) {
      store.sweep(1 << 20);
      // Nothing that is due may survive a full sweep: every stored key is live.
      std::size_t live = 0;
      store.for_each_key([&live](const std::string&) { ++live; });
      FUZZ_CHECK(store.size() == live);
    }
    if (out.size() > (1 << 20)) out.clear();
  }
  return 0;
}
