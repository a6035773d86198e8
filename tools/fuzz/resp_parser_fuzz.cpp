// libFuzzer target: examples/resp_server's RESP2 request parser (resp_parser.cpp).
//
// Input: one control byte (chunking seed and limits), then the bytes a client would send.
// Checks, besides no crash / no sanitizer report:
//   - parsing the input all at once and fed in random chunks (as reads deliver it) gives the same
//     commands, the same error (or none) and the same unconsumed tail;
//   - consumed() never exceeds the buffer; every command has at least one argument;
//   - a command re-encoded as a RESP array parses back to the same arguments.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.hpp"
#include "resp_parser.hpp"

namespace {

struct Outcome {
  std::vector<std::vector<std::string>> commands;
  bool error = false;
  std::string message;
  std::size_t left = 0;
};

Outcome parse(std::string_view input, const resp::Limits& limits, fuzz::Rng* rng) {
  resp::Parser p(limits);
  Outcome out;
  std::string buf;
  std::size_t fed = 0;
  while (true) {
    const std::size_t n =
        rng ? std::min(rng->chunk(input.size() + 1), input.size() - fed) : input.size() - fed;
    buf.append(input.substr(fed, n));
    fed += n;
    for (;;) {
      const resp::Parser::Result r = p.parse(buf);
      FUZZ_CHECK(p.consumed() <= buf.size());
      if (r == resp::Parser::Result::kCommand) {
        FUZZ_CHECK(!p.args().empty());
        out.commands.emplace_back(p.args().begin(), p.args().end());
      } else if (r == resp::Parser::Result::kError) {
        FUZZ_CHECK(!p.error().empty());
        FUZZ_CHECK(p.error().find_first_of("\r\n") == std::string::npos);
        out.error = true;
        out.message = p.error();
        return out;
      } else {
        FUZZ_CHECK(p.bytes_wanted() >= 1);
      }
      buf.erase(0, p.consumed());
      if (r != resp::Parser::Result::kCommand) break;
    }
    if (fed == input.size()) break;
  }
  out.left = buf.size();
  return out;
}

std::string encode(const std::vector<std::string>& args) {
  // append() rather than operator+: GCC 12 warns falsely (-Wrestrict) on "literal" + string.
  std::string out;
  out.append("*").append(std::to_string(args.size())).append("\r\n");
  for (const std::string& a : args) {
    out.append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t ctl = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  resp::Limits limits;
  if (ctl & 0x80) {  // small limits, so the fuzzer reaches every limit check
    limits.max_bulk_len = 64;
    limits.max_array_len = 8;
    limits.max_inline_len = 48;
    limits.max_command_len = 256;
  }
  const Outcome whole = parse(input, limits, nullptr);
  fuzz::Rng rng(ctl);
  const Outcome chunked = parse(input, limits, &rng);
  FUZZ_CHECK(whole.commands == chunked.commands);
  FUZZ_CHECK(whole.error == chunked.error);
  FUZZ_CHECK(whole.message == chunked.message);
  FUZZ_CHECK(whole.left == chunked.left);
  for (const auto& cmd : whole.commands) {
    const Outcome again = parse(encode(cmd), resp::Limits{}, nullptr);
    FUZZ_CHECK(!again.error);
    FUZZ_CHECK(again.commands.size() == 1 && again.commands[0] == cmd);
  }
  return 0;
}
