#include "resp_parser.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace resp {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// One byte as it may appear inside an error line: itself if printable, else \xNN.
std::string printable(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  static const char kHex[] = "0123456789abcdef";
  return std::string{'\\', 'x', kHex[u >> 4], kHex[u & 15]};
}

}  // namespace

std::optional<std::int64_t> parse_int64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  if (s.size() == 1 && s[0] == '0') return 0;
  std::size_t i = 0;
  const bool negative = s[0] == '-';
  if (negative) {
    if (s.size() == 1) return std::nullopt;
    i = 1;
  }
  if (s[i] < '1' || s[i] > '9') return std::nullopt;  // no leading zeros, no "-0"
  std::uint64_t v = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  constexpr std::uint64_t kMax =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (v > kMax + 1) return std::nullopt;
    return v == kMax + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(v);
  }
  if (v > kMax) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::optional<std::vector<std::string>> split_inline_args(std::string_view line) {
  std::vector<std::string> out;
  std::size_t p = 0;
  const std::size_t n = line.size();
  for (;;) {
    while (p < n && is_space(line[p])) ++p;
    if (p == n) return out;
    std::string cur;
    bool inq = false;   // inside "double quotes"
    bool insq = false;  // inside 'single quotes'
    bool done = false;
    while (!done) {
      if (inq) {
        if (p == n) return std::nullopt;  // unterminated quotes
        if (line[p] == '\\' && p + 3 < n && line[p + 1] == 'x' && is_hex(line[p + 2]) &&
            is_hex(line[p + 3])) {
          cur.push_back(static_cast<char>(hex_val(line[p + 2]) * 16 + hex_val(line[p + 3])));
          p += 3;
        } else if (line[p] == '\\' && p + 1 < n) {
          ++p;
          char c = line[p];
          switch (c) {
            case 'n':
              c = '\n';
              break;
            case 'r':
              c = '\r';
              break;
            case 't':
              c = '\t';
              break;
            case 'b':
              c = '\b';
              break;
            case 'a':
              c = '\a';
              break;
            default:
              break;
          }
          cur.push_back(c);
        } else if (line[p] == '"') {
          // The closing quote must be followed by a space or nothing at all.
          if (p + 1 < n && !is_space(line[p + 1])) return std::nullopt;
          done = true;
        } else {
          cur.push_back(line[p]);
        }
      } else if (insq) {
        if (p == n) return std::nullopt;
        if (line[p] == '\\' && p + 1 < n && line[p + 1] == '\'') {
          ++p;
          cur.push_back('\'');
        } else if (line[p] == '\'') {
          if (p + 1 < n && !is_space(line[p + 1])) return std::nullopt;
          done = true;
        } else {
          cur.push_back(line[p]);
        }
      } else {
        if (p == n) break;
        switch (line[p]) {
          case ' ':
          case '\n':
          case '\r':
          case '\t':
          case '\v':
          case '\f':
            done = true;
            break;
          case '"':
            inq = true;
            break;
          case '\'':
            insq = true;
            break;
          default:
            cur.push_back(line[p]);
            break;
        }
      }
      if (p < n) ++p;
    }
    out.push_back(std::move(cur));
  }
}

void Parser::reset() {
  kind_ = Kind::kNone;
  remaining_ = 0;
  bulk_len_ = -1;
  pos_ = 0;
  scanned_ = 0;
  spans_.clear();
  inline_args_.clear();
  args_.clear();
  consumed_ = 0;
  wanted_ = 1;
  error_.clear();
  failed_ = false;
}

Parser::Result Parser::fail(std::string msg) {
  error_ = std::move(msg);
  failed_ = true;
  result_ = Result::kError;
  return Result::kError;
}

Parser::Result Parser::finish(std::string_view cmd, std::size_t end) {
  args_.clear();
  if (kind_ == Kind::kArray) {
    args_.reserve(spans_.size());
    for (const auto& [off, len] : spans_) args_.emplace_back(cmd.data() + off, len);
  } else {
    args_.reserve(inline_args_.size());
    for (const std::string& a : inline_args_) args_.emplace_back(a);
  }
  command_len_ = end;
  kind_ = Kind::kNone;
  remaining_ = 0;
  bulk_len_ = -1;
  pos_ = 0;
  scanned_ = 0;
  spans_.clear();
  return Result::kCommand;
}

std::optional<std::size_t> Parser::find_crlf(std::string_view cmd, std::size_t from,
                                             const char* too_big) {
  const std::size_t begin = std::max(scanned_, from);
  const void* hit =
      begin < cmd.size() ? std::memchr(cmd.data() + begin, '\r', cmd.size() - begin) : nullptr;
  if (hit == nullptr) {
    if (cmd.size() - from > limits_.max_inline_len) {
      fail(too_big);
      return std::nullopt;
    }
    scanned_ = cmd.size();
    wanted_ = 1;
    result_ = Result::kNeedMore;
    return std::nullopt;
  }
  const std::size_t cr = static_cast<const char*>(hit) - cmd.data();
  if (cr - from > limits_.max_inline_len) {
    fail(too_big);
    return std::nullopt;
  }
  if (cr + 1 >= cmd.size()) {
    scanned_ = cr;  // look at this '\r' again once its '\n' is here
    wanted_ = 1;
    result_ = Result::kNeedMore;
    return std::nullopt;
  }
  if (cmd[cr + 1] != '\n') {
    fail("expected '\\n' after '\\r', got '" + printable(cmd[cr + 1]) + "'");
    return std::nullopt;
  }
  return cr;
}

Parser::Result Parser::parse_inline(std::string_view cmd) {
  const std::size_t begin = scanned_;
  const void* hit =
      begin < cmd.size() ? std::memchr(cmd.data() + begin, '\n', cmd.size() - begin) : nullptr;
  if (hit == nullptr) {
    if (cmd.size() > limits_.max_inline_len) return fail("too big inline request");
    scanned_ = cmd.size();
    wanted_ = 1;
    return Result::kNeedMore;
  }
  const std::size_t nl = static_cast<const char*>(hit) - cmd.data();
  if (nl > limits_.max_inline_len) return fail("too big inline request");
  std::string_view line = cmd.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::optional<std::vector<std::string>> args = split_inline_args(line);
  if (!args) return fail("unbalanced quotes in request");
  inline_args_ = std::move(*args);
  return finish(cmd, nl + 1);
}

Parser::Result Parser::parse_multibulk(std::string_view cmd) {
  if (!in_array_header_done_) {
    const std::optional<std::size_t> cr = find_crlf(cmd, 1, "too big mbulk count string");
    if (!cr) return result_;
    const std::optional<std::int64_t> n = parse_int64(cmd.substr(1, *cr - 1));
    if (!n || *n > static_cast<std::int64_t>(limits_.max_array_len)) {
      return fail("invalid multibulk length");
    }
    pos_ = *cr + 2;
    scanned_ = pos_;
    if (*n <= 0) return finish(cmd, pos_);  // "*0" and "*-1": an empty command, skipped
    in_array_header_done_ = true;
    remaining_ = *n;
    spans_.clear();
    spans_.reserve(static_cast<std::size_t>(std::min<std::int64_t>(*n, 64)));
  }
  while (remaining_ > 0) {
    if (bulk_len_ < 0) {
      if (pos_ >= cmd.size()) {
        wanted_ = 1;
        return Result::kNeedMore;
      }
      if (cmd[pos_] != '$') return fail("expected '$', got '" + printable(cmd[pos_]) + "'");
      const std::optional<std::size_t> cr = find_crlf(cmd, pos_ + 1, "too big bulk count string");
      if (!cr) return result_;
      const std::optional<std::int64_t> n = parse_int64(cmd.substr(pos_ + 1, *cr - pos_ - 1));
      if (!n || *n < 0 || static_cast<std::uint64_t>(*n) > limits_.max_bulk_len) {
        return fail("invalid bulk length");
      }
      pos_ = *cr + 2;
      scanned_ = pos_;
      if (pos_ + static_cast<std::size_t>(*n) + 2 > limits_.max_command_len) {
        return fail("too big command (over the query buffer limit)");
      }
      bulk_len_ = *n;
    }
    const std::size_t need = pos_ + static_cast<std::size_t>(bulk_len_) + 2;
    if (cmd.size() < need) {
      wanted_ = need - cmd.size();
      return Result::kNeedMore;
    }
    if (cmd[need - 2] != '\r' || cmd[need - 1] != '\n') {
      return fail("expected CRLF after a bulk string of length " + std::to_string(bulk_len_));
    }
    spans_.emplace_back(pos_, static_cast<std::size_t>(bulk_len_));
    pos_ = need;
    scanned_ = pos_;
    bulk_len_ = -1;
    --remaining_;
  }
  return finish(cmd, pos_);
}

Parser::Result Parser::parse(std::string_view buf) {
  consumed_ = 0;
  wanted_ = 1;
  args_.clear();
  if (failed_) return Result::kError;
  std::size_t start = 0;
  for (;;) {
    const std::string_view cmd = buf.substr(start);
    if (kind_ == Kind::kNone) {
      if (cmd.empty()) {
        consumed_ = start;
        return Result::kNeedMore;
      }
      kind_ = cmd[0] == '*' ? Kind::kArray : Kind::kInline;
      in_array_header_done_ = false;
      inline_args_.clear();
    }
    const Result r = kind_ == Kind::kArray ? parse_multibulk(cmd) : parse_inline(cmd);
    switch (r) {
      case Result::kCommand:
        if (args_.empty()) {  // an empty command: skip it and go on
          start += command_len_;
          continue;
        }
        consumed_ = start + command_len_;
        return r;
      case Result::kNeedMore:
        consumed_ = start;
        return r;
      case Result::kError:
        consumed_ = start;
        return r;
    }
  }
}

}  // namespace resp
