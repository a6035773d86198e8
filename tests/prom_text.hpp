// A strict parser of Prometheus' text exposition format (version 0.0.4) for the tests of
// weft::write_metrics (metrics_test) and of http_server's GET /metrics (http_server_test), and
// promtool_check(), which runs `promtool check metrics` where promtool is on PATH.
//
// Stricter than the format where weft's output promises more. Every line ends in '\n' and is
//   # HELP name text          (text: any characters, `\\` and `\n` the only escapes)
//   # TYPE name counter|gauge|histogram
//   name{label="value",...} value      (labels optional; no timestamp)
// and nothing else: no blank lines, no other comments. Each family is one group of lines: its
// HELP, then its TYPE, then all of its samples; a family never appears twice. Names match
// [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* (not "__..."), label values use
// the escapes `\\`, `\"` and `\n` only; a sample has no label twice, no two samples are the same
// series. A counter is named *_total and its value is a number >= 0; a gauge's samples carry its
// name; a histogram's samples are name_bucket (with `le`), name_sum and name_count, and for each
// label set its buckets come in increasing `le`, are cumulative (never decrease) and end in
// le="+Inf", which equals its _count.
#pragma once

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft_test::prom {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Family {
  std::string name, type, help;
  std::vector<Sample> samples;
};

struct Histogram {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count), +Inf last
  double sum = 0, count = 0;
  // The cumulative count of the largest bucket whose `le` is below `limit`, 0 if none.
  double count_below(double limit) const {
    double c = 0;
    for (const auto& [le, n] : buckets) {
      if (le < limit) c = n;
    }
    return c;
  }
};

struct Exposition {
  std::vector<Family> families;
  std::string error;  // empty: the text is valid

  const Family* family(std::string_view name) const {
    for (const Family& f : families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
  // The value of the sample `name` with exactly `labels`, or NaN.
  double value(std::string_view name, const std::map<std::string, std::string>& labels = {}) const {
    for (const Family& f : families) {
      for (const Sample& s : f.samples) {
        if (s.name == name && s.labels == labels) return s.value;
      }
    }
    return std::nan("");
  }
  // The unlabelled histogram `name` (empty buckets if it is missing).
  Histogram histogram(std::string_view name) const {
    Histogram h;
    const Family* f = family(name);
    if (!f) return h;
    for (const Sample& s : f->samples) {
      if (s.name == f->name + "_bucket") {
        h.buckets.emplace_back(parse_le(s.labels.at("le")), s.value);
      } else if (s.name == f->name + "_sum") {
        h.sum = s.value;
      } else if (s.name == f->name + "_count") {
        h.count = s.value;
      }
    }
    return h;
  }

  static double parse_le(const std::string& v) {
    if (v == "+Inf") return HUGE_VAL;
    return std::strtod(v.c_str(), nullptr);
  }
};

namespace detail {

inline bool name_start(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
inline bool name_char(char c, bool colon) { return name_start(c, colon) || (c >= '0' && c <= '9'); }

// Reads a name at `p` (metric names may hold ':', label names may not); empty if none.
inline std::string_view read_name(std::string_view line, std::size_t& p, bool colon) {
  const std::size_t start = p;
  if (p >= line.size() || !name_start(line[p], colon)) return {};
  while (p < line.size() && name_char(line[p], colon)) ++p;
  return line.substr(start, p - start);
}

inline bool valid_metric_name(std::string_view s) {
  std::size_t p = 0;
  return !read_name(s, p, true).empty() && p == s.size();
}

// A sample value: a float, "+Inf", "-Inf" or "NaN", all of `text`.
inline bool parse_value(std::string_view text, double& out) {
  if (text == "+Inf") return out = HUGE_VAL, true;
  if (text == "-Inf") return out = -HUGE_VAL, true;
  if (text == "NaN") return out = std::nan(""), true;
  if (text.empty()) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return false;
    }
  }
  const std::string s(text);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

inline std::string series_key(const Sample& s) {
  std::string k = s.name;
  for (const auto& [n, v] : s.labels) k += "\x1f" + n + "=" + v;
  return k;
}

// Parses `line` as a sample into `s`; returns what is wrong, or "".
inline std::string parse_sample(std::string_view line, Sample& s) {
  std::size_t p = 0;
  const std::string_view name = read_name(line, p, true);
  if (name.empty()) return "a sample must start with a metric name";
  s.name = std::string(name);
  if (p < line.size() && line[p] == '{') {
    ++p;
    bool first = true;
    while (p < line.size() && line[p] != '}') {
      if (!first) {
        if (line[p] != ',') return "labels must be separated by ','";
        ++p;
      }
      first = false;
      const std::string_view label = read_name(line, p, false);
      if (label.empty()) return "bad label name";
      if (label.substr(0, 2) == "__") return "label names starting with __ are reserved";
      if (p + 1 >= line.size() || line[p] != '=' || line[p + 1] != '"') {
        return "a label name must be followed by =\"";
      }
      p += 2;
      std::string value;
      for (;;) {
        if (p >= line.size()) return "unterminated label value";
        const char c = line[p++];
        if (c == '"') break;
        if (c == '\\') {
          if (p >= line.size()) return "unterminated escape in a label value";
          const char e = line[p++];
          if (e == '\\' || e == '"') {
            value += e;
          } else if (e == 'n') {
            value += '\n';
          } else {
            return "bad escape in a label value";
          }
        } else {
          value += c;
        }
      }
      if (!s.labels.emplace(std::string(label), std::move(value)).second) {
        return "label " + std::string(label) + " given twice";
      }
    }
    if (p >= line.size()) return "unterminated label set";
    if (first) return "an empty label set must be left out";
    ++p;  // '}'
  }
  if (p >= line.size() || line[p] != ' ') return "a single space must separate the value";
  ++p;
  const std::string_view value = line.substr(p);
  if (value.find(' ') != std::string_view::npos) return "unexpected timestamp or text after value";
  if (!parse_value(value, s.value)) return "bad sample value '" + std::string(value) + "'";
  return "";
}

// Checks a finished family against its type's rules; returns what is wrong, or "".
inline std::string check_family(const Family& f) {
  if (f.type.empty()) return "family " + f.name + " has no # TYPE";
  if (f.samples.empty()) return "family " + f.name + " has no samples";
  if (f.type == "counter") {
    if (f.name.size() < 6 || f.name.compare(f.name.size() - 6, 6, "_total") != 0) {
      return "counter " + f.name + " must be named *_total";
    }
    for (const Sample& s : f.samples) {
      if (s.name != f.name) return "sample " + s.name + " in counter family " + f.name;
      if (!(s.value >= 0)) return "counter " + f.name + " has a value that is not >= 0";
    }
    return "";
  }
  if (f.type == "gauge") {
    for (const Sample& s : f.samples) {
      if (s.name != f.name) return "sample " + s.name + " in gauge family " + f.name;
    }
    return "";
  }
  // histogram: per label set (le aside), buckets in increasing le, cumulative, +Inf == _count.
  struct Series {
    std::vector<std::pair<double, double>> buckets;
    std::optional<double> sum, count;
  };
  std::map<std::map<std::string, std::string>, Series> series;
  for (const Sample& s : f.samples) {
    std::map<std::string, std::string> rest = s.labels;
    if (s.name == f.name + "_bucket") {
      const auto le = rest.find("le");
      if (le == rest.end()) return f.name + "_bucket without an le label";
      double bound;
      if (!parse_value(le->second, bound) || std::isnan(bound)) return "bad le " + le->second;
      rest.erase(le);
      series[rest].buckets.emplace_back(bound, s.value);
    } else if (rest.count("le")) {
      return "le label on " + s.name;
    } else if (s.name == f.name + "_sum") {
      series[rest].sum = s.value;
    } else if (s.name == f.name + "_count") {
      series[rest].count = s.value;
    } else {
      return "sample " + s.name + " in histogram family " + f.name;
    }
  }
  for (const auto& [labels, h] : series) {
    if (h.buckets.empty() || !h.sum || !h.count) {
      return "histogram " + f.name + " needs _bucket, _sum and _count samples";
    }
    for (std::size_t i = 1; i < h.buckets.size(); ++i) {
      if (!(h.buckets[i].first > h.buckets[i - 1].first)) {
        return "histogram " + f.name + ": buckets not in increasing le";
      }
      if (!(h.buckets[i].second >= h.buckets[i - 1].second)) {
        return "histogram " + f.name + ": bucket counts decrease (not cumulative)";
      }
    }
    if (h.buckets.back().first != HUGE_VAL) return "histogram " + f.name + ": no le=\"+Inf\"";
    if (h.buckets.back().second != *h.count) {
      return "histogram " + f.name + ": the +Inf bucket differs from _count";
    }
    if (!(*h.sum >= 0)) return "histogram " + f.name + ": negative _sum";
  }
  return "";
}

}  // namespace detail

inline Exposition parse(std::string_view text) {
  Exposition e;
  auto fail = [&e](std::size_t line_no, const std::string& why, std::string_view line) {
    e.error = "line " + std::to_string(line_no) + ": " + why + ": '" + std::string(line) + "'";
    return e;
  };
  if (text.empty()) return e.error = "empty exposition", e;
  if (text.back() != '\n') return e.error = "the last line does not end in a newline", e;
  std::set<std::string> seen_families, seen_series;
  Family* cur = nullptr;
  std::size_t line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    ++line_no;
    if (line.empty()) return fail(line_no, "blank line", line);
    if (line[0] == '#') {
      const bool help = line.substr(0, 7) == "# HELP ", type = line.substr(0, 7) == "# TYPE ";
      if (!help && !type) return fail(line_no, "a comment other than # HELP or # TYPE", line);
      const std::string_view rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      if (sp == std::string_view::npos) return fail(line_no, "no text after the name", line);
      const std::string name(rest.substr(0, sp));
      const std::string_view arg = rest.substr(sp + 1);
      if (!detail::valid_metric_name(name)) return fail(line_no, "bad metric name", line);
      if (help) {
        if (cur) {
          if (std::string why = detail::check_family(*cur); !why.empty()) {
            return fail(line_no, why, line);
          }
        }
        if (!seen_families.insert(name).second) {
          return fail(line_no, "family " + name + " appears twice", line);
        }
        if (arg.empty()) return fail(line_no, "empty help text", line);
        for (std::size_t i = 0; i < arg.size(); ++i) {
          if (arg[i] == '\\' &&
              (i + 1 == arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n'))) {
            return fail(line_no, "bad escape in help text", line);
          }
          if (arg[i] == '\\') ++i;
        }
        e.families.push_back(Family{name, "", std::string(arg), {}});
        cur = &e.families.back();
      } else {
        if (!cur || cur->name != name)
          return fail(line_no, "# TYPE not right after its # HELP", line);
        if (!cur->type.empty()) return fail(line_no, "a second # TYPE", line);
        if (!cur->samples.empty()) return fail(line_no, "# TYPE after samples", line);
        if (arg != "counter" && arg != "gauge" && arg != "histogram") {
          return fail(line_no, "type must be counter, gauge or histogram", line);
        }
        cur->type = std::string(arg);
      }
      continue;
    }
    Sample s;
    if (std::string why = detail::parse_sample(line, s); !why.empty())
      return fail(line_no, why, line);
    if (!cur || cur->type.empty())
      return fail(line_no, "a sample before its family's # TYPE", line);
    const bool ours =
        s.name == cur->name || (cur->type == "histogram" &&
                                (s.name == cur->name + "_bucket" || s.name == cur->name + "_sum" ||
                                 s.name == cur->name + "_count"));
    if (!ours)
      return fail(line_no, "a sample outside its family's group (" + cur->name + ")", line);
    if (!seen_series.insert(detail::series_key(s)).second) {
      return fail(line_no, "duplicate series", line);
    }
    cur->samples.push_back(std::move(s));
  }
  if (cur) {
    if (std::string why = detail::check_family(*cur); !why.empty()) {
      e.error = "at the end: " + why;
    }
  }
  return e;
}

// `promtool check metrics` on `text`: nullopt where promtool is not on PATH; else its exit
// status (0: accepted) and output.
struct PromtoolResult {
  int status = -1;
  std::string output;
};
inline std::optional<PromtoolResult> promtool_check(const std::string& text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return std::nullopt;
  char path[] = "/tmp/weft-metrics-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return PromtoolResult{-1, "mkstemp failed"};
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  PromtoolResult r;
  if (written) {
    FILE* p = popen(("promtool check metrics < " + std::string(path) + " 2>&1").c_str(), "r");
    if (p) {
      char buf[4096];
      std::size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
      const int st = pclose(p);
      r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
  } else {
    r.output = "writing " + std::string(path) + " failed";
  }
  unlink(path);
  return r;
}

}  // namespace weft_test::prom
