#include "chat_protocol.hpp"

#include <cstring>

namespace chat {

void LineFramer::feed(std::string_view bytes) {
  if (failed_) return;
  if (begin_ > 0 && begin_ == buf_.size()) {
    buf_.clear();
    begin_ = 0;
    scanned_ = 0;
  } else if (begin_ > 4096 && begin_ * 2 > buf_.size()) {
    buf_.erase(0, begin_);  // drop returned lines once they are most of the buffer
    begin_ = 0;
  }
  buf_.append(bytes.data(), bytes.size());
}

LineFramer::Next LineFramer::next(std::string* line) {
  if (failed_) return Next::kTooLong;
  const std::size_t pending = buf_.size() - begin_;
  const char* base = buf_.data() + begin_;
  const void* nl =
      scanned_ < pending ? std::memchr(base + scanned_, '\n', pending - scanned_) : nullptr;
  if (nl == nullptr) {
    scanned_ = pending;
    // Room for max_line bytes plus a '\r' whose '\n' is still to come.
    if (pending > max_line_ + 1) {
      failed_ = true;
      return Next::kTooLong;
    }
    return Next::kNeedMore;
  }
  const std::size_t end = static_cast<std::size_t>(static_cast<const char*>(nl) - base);
  std::size_t len = end;
  if (len > 0 && base[len - 1] == '\r') --len;
  if (len > max_line_) {
    failed_ = true;
    return Next::kTooLong;
  }
  line->assign(base, len);
  begin_ += end + 1;
  scanned_ = 0;
  return Next::kLine;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Command parse_line(std::string_view line) {
  Command c;
  if (trim(line).empty()) return c;  // kEmpty
  if (line.front() != '/' || line.size() == 1 || line[1] == '/') {
    // "//text" sends "/text", so a message can start with a slash.
    c.kind = Command::Kind::kMessage;
    c.arg = line.size() > 1 && line[0] == '/' ? line.substr(1) : line;
    return c;
  }
  const std::size_t sp = line.find_first_of(" \t");
  const std::string_view word = line.substr(1, sp == std::string_view::npos ? sp : sp - 1);
  const std::string_view rest = sp == std::string_view::npos ? "" : trim(line.substr(sp + 1));
  c.arg = rest;
  if (word == "nick") {
    c.kind = Command::Kind::kNick;
  } else if (word == "me") {
    c.kind = Command::Kind::kMe;
  } else if (word == "who") {
    c.kind = Command::Kind::kWho;
  } else if (word == "quit") {
    c.kind = Command::Kind::kQuit;
  } else if (word == "help") {
    c.kind = Command::Kind::kHelp;
  } else {
    c.kind = Command::Kind::kUnknown;
    c.arg = word;
  }
  return c;
}

bool valid_nick(std::string_view nick) {
  if (nick.empty() || nick.size() > 32) return false;
  for (char ch : nick) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 if invalid. Rejects overlongs,
// surrogates and code points above U+10FFFF. *cp gets the code point.
std::size_t utf8_seq(std::string_view s, std::size_t i, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  std::size_t n;
  char32_t v;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, v = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, v = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, v = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

}  // namespace

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_seq(text, i, &cp);
    if (n == 0) {
      out.push_back('?');
      ++i;
      continue;
    }
    if (cp == '\t') {
      out.push_back(' ');
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      out.push_back('?');
    } else {
      out.append(text.data() + i, n);
    }
    i += n;
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_seq(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace chat
