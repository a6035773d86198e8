#include "resp_commands.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "resp_parser.hpp"

namespace resp {

void append_simple(std::string* out, std::string_view s) {
  out->push_back('+');
  out->append(s);
  out->append("\r\n");
}

void append_error(std::string* out, std::string_view s) {
  out->push_back('-');
  const std::size_t at = out->size();
  out->append(s);
  // An error is one line: a client-supplied name in it must not end it early.
  std::replace_if(
      out->begin() + static_cast<std::ptrdiff_t>(at), out->end(),
      [](char c) { return c == '\r' || c == '\n'; }, ' ');
  out->append("\r\n");
}

namespace {

void append_prefixed_int(std::string* out, char prefix, std::int64_t v) {
  char buf[24];
  buf[0] = prefix;
  const auto r = std::to_chars(buf + 1, buf + sizeof buf - 2, v);
  char* end = r.ptr;
  *end++ = '\r';
  *end++ = '\n';
  out->append(buf, static_cast<std::size_t>(end - buf));
}

}  // namespace

void append_int(std::string* out, std::int64_t v) { append_prefixed_int(out, ':', v); }

void append_bulk(std::string* out, std::string_view s) {
  append_prefixed_int(out, '$', static_cast<std::int64_t>(s.size()));
  out->append(s);
  out->append("\r\n");
}

void append_nil(std::string* out) { out->append("$-1\r\n"); }

void append_array_header(std::string* out, std::size_t n) {
  append_prefixed_int(out, '*', static_cast<std::int64_t>(n));
}

namespace {

constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
constexpr std::string_view kSyntax = "ERR syntax error";

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;  // b is lower case
  }
  return true;
}

struct Ctx {
  Store& store;
  std::span<const std::string_view> args;
  Session& session;
  std::string* out;
  std::string_view name;  // lower case
};

void wrong_args(Ctx& c, std::string_view name) {
  append_error(c.out, "ERR wrong number of arguments for '" + std::string(name) + "' command");
}

void unknown_subcommand(Ctx& c) {
  std::string upper(c.name);
  for (char& ch : upper) ch = static_cast<char>(ch - 'a' + 'A');
  append_error(c.out, "ERR unknown subcommand '" + std::string(c.args[1].substr(0, 128)) +
                          "'. Try " + upper + " HELP.");
}

// now + delta_ms, or nullopt on overflow.
std::optional<std::int64_t> deadline_after(Ctx& c, std::int64_t delta_ms) {
  const std::int64_t now = c.store.now_ms();
  if (delta_ms > 0 && now > std::numeric_limits<std::int64_t>::max() - delta_ms) {
    return std::nullopt;
  }
  if (delta_ms < 0 && now < std::numeric_limits<std::int64_t>::min() - delta_ms) {
    return std::nullopt;
  }
  return now + delta_ms;
}

// A Unix time in ms (EXAT/PXAT) as a steady-clock deadline.
std::optional<std::int64_t> deadline_from_unix_ms(Ctx& c, std::int64_t unix_ms) {
  const std::int64_t wall_now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
  if (unix_ms < 0 && wall_now > std::numeric_limits<std::int64_t>::max() + unix_ms) {
    return std::nullopt;
  }
  return deadline_after(c, unix_ms - wall_now);
}

void cmd_ping(Ctx& c) {
  if (c.args.size() > 2) return wrong_args(c, "ping");
  if (c.args.size() == 2) return append_bulk(c.out, c.args[1]);
  append_simple(c.out, "PONG");
}

void cmd_echo(Ctx& c) { append_bulk(c.out, c.args[1]); }

void cmd_get(Ctx& c) {
  if (!c.store.view(c.args[1], [&](const std::string& v) { append_bulk(c.out, v); })) {
    append_nil(c.out);
  }
}

void cmd_set(Ctx& c) {
  Store::SetOptions opts;
  bool have_expire = false;
  for (std::size_t j = 3; j < c.args.size(); ++j) {
    const std::string opt = lower(c.args[j]);
    const bool has_next = j + 1 < c.args.size();
    if (opt == "nx" && opts.cond != Store::SetCond::kIfExists) {
      opts.cond = Store::SetCond::kIfMissing;
    } else if (opt == "xx" && opts.cond != Store::SetCond::kIfMissing) {
      opts.cond = Store::SetCond::kIfExists;
    } else if (opt == "get") {
      opts.get_old = true;
    } else if (opt == "keepttl" && !have_expire) {
      opts.keep_ttl = true;
    } else if ((opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") && has_next &&
               !have_expire && !opts.keep_ttl) {
      const std::optional<std::int64_t> v = parse_int64(c.args[++j]);
      if (!v) return append_error(c.out, kNotInteger);
      const std::string_view bad = "ERR invalid expire time in 'set' command";
      if (*v <= 0) return append_error(c.out, bad);
      const bool seconds = opt == "ex" || opt == "exat";
      if (seconds && *v > std::numeric_limits<std::int64_t>::max() / 1000) {
        return append_error(c.out, bad);
      }
      const std::int64_t ms = seconds ? *v * 1000 : *v;
      const std::optional<std::int64_t> at =
          opt.size() == 2 ? deadline_after(c, ms) : deadline_from_unix_ms(c, ms);
      if (!at) return append_error(c.out, bad);
      // A deadline that has passed (EXAT in the past) stores a key that is already gone; keep
      // the deadline non-zero so it still reads as expired.
      opts.expire_at_ms = std::max<std::int64_t>(*at, 1);
      have_expire = true;
    } else {
      return append_error(c.out, kSyntax);
    }
  }
  const Store::SetResult r = c.store.set(c.args[1], c.args[2], opts);
  if (opts.get_old) {
    if (r.had_old) return append_bulk(c.out, r.old);
    return append_nil(c.out);
  }
  if (r.done) return append_simple(c.out, "OK");
  append_nil(c.out);
}

void cmd_del(Ctx& c) {
  append_int(c.out, static_cast<std::int64_t>(c.store.del(c.args.subspan(1))));
}

void cmd_exists(Ctx& c) {
  std::int64_t n = 0;
  for (std::string_view k : c.args.subspan(1)) n += c.store.exists(k) ? 1 : 0;
  append_int(c.out, n);
}

void incr_reply(Ctx& c, std::int64_t delta) {
  std::int64_t v = 0;
  switch (c.store.incr_by(c.args[1], delta, &v)) {
    case Store::IncrStatus::kOk:
      return append_int(c.out, v);
    case Store::IncrStatus::kNotInteger:
      return append_error(c.out, kNotInteger);
    case Store::IncrStatus::kOverflow:
      return append_error(c.out, "ERR increment or decrement would overflow");
  }
}

void cmd_incr(Ctx& c) { incr_reply(c, 1); }
void cmd_decr(Ctx& c) { incr_reply(c, -1); }

void cmd_incrby(Ctx& c) {
  const std::optional<std::int64_t> d = parse_int64(c.args[2]);
  if (!d) return append_error(c.out, kNotInteger);
  incr_reply(c, *d);
}

void cmd_decrby(Ctx& c) {
  const std::optional<std::int64_t> d = parse_int64(c.args[2]);
  if (!d) return append_error(c.out, kNotInteger);
  if (*d == std::numeric_limits<std::int64_t>::min()) {
    return append_error(c.out, "ERR decrement would overflow");
  }
  incr_reply(c, -*d);
}

void cmd_mget(Ctx& c) {
  const auto keys = c.args.subspan(1);
  append_array_header(c.out, keys.size());
  c.store.mget(keys, [&](std::size_t, const std::string* v) {
    if (v != nullptr) {
      append_bulk(c.out, *v);
    } else {
      append_nil(c.out);
    }
  });
}

void cmd_mset(Ctx& c) {
  if (c.args.size() % 2 == 0) return wrong_args(c, "mset");
  c.store.mset(c.args.subspan(1));
  append_simple(c.out, "OK");
}

void expire_generic(Ctx& c, bool seconds) {
  const std::optional<std::int64_t> v = parse_int64(c.args[2]);
  if (!v) return append_error(c.out, kNotInteger);
  const std::string bad = "ERR invalid expire time in '" + std::string(c.name) + "' command";
  if (seconds && (*v > std::numeric_limits<std::int64_t>::max() / 1000 ||
                  *v < std::numeric_limits<std::int64_t>::min() / 1000)) {
    return append_error(c.out, bad);
  }
  const std::optional<std::int64_t> at = deadline_after(c, seconds ? *v * 1000 : *v);
  if (!at) return append_error(c.out, bad);
  bool nx = false, xx = false, gt = false, lt = false;
  for (std::size_t j = 3; j < c.args.size(); ++j) {
    const std::string opt = lower(c.args[j]);
    if (opt == "nx") {
      nx = true;
    } else if (opt == "xx") {
      xx = true;
    } else if (opt == "gt") {
      gt = true;
    } else if (opt == "lt") {
      lt = true;
    } else {
      return append_error(c.out, "ERR Unsupported option " + std::string(c.args[j].substr(0, 128)));
    }
  }
  if (nx && (xx || gt || lt)) {
    return append_error(c.out,
                        "ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if (gt && lt) {
    return append_error(c.out, "ERR GT and LT options at the same time are not compatible");
  }
  const Store::ExpireCond cond = nx   ? Store::ExpireCond::kNx
                                 : gt ? Store::ExpireCond::kGt
                                 : lt ? Store::ExpireCond::kLt
                                 : xx ? Store::ExpireCond::kXx
                                      : Store::ExpireCond::kAlways;
  // GT/LT combined with XX: XX's condition (has a TTL) is implied by GT and checked for LT.
  if (xx && lt && c.store.pttl(c.args[1]) == -1) return append_int(c.out, 0);
  append_int(c.out, c.store.expire_at(c.args[1], std::max<std::int64_t>(*at, 1), cond) ? 1 : 0);
}

void cmd_expire(Ctx& c) { expire_generic(c, true); }
void cmd_pexpire(Ctx& c) { expire_generic(c, false); }

void cmd_ttl(Ctx& c) {
  const std::int64_t ms = c.store.pttl(c.args[1]);
  append_int(c.out, ms < 0 ? ms : (ms + 500) / 1000);
}

void cmd_pttl(Ctx& c) { append_int(c.out, c.store.pttl(c.args[1])); }

void cmd_persist(Ctx& c) { append_int(c.out, c.store.persist(c.args[1]) ? 1 : 0); }

void cmd_keys(Ctx& c) {
  std::vector<std::string> keys;
  const std::string_view pattern = c.args[1];
  const bool all = pattern == "*";
  c.store.for_each_key([&](const std::string& k) {
    if (all || glob_match(pattern, k)) keys.push_back(k);
  });
  append_array_header(c.out, keys.size());
  for (const std::string& k : keys) append_bulk(c.out, k);
}

void cmd_dbsize(Ctx& c) { append_int(c.out, static_cast<std::int64_t>(c.store.size())); }

void cmd_flushall(Ctx& c) {
  if (c.args.size() > 2) return append_error(c.out, kSyntax);
  if (c.args.size() == 2 && !iequals(c.args[1], "async") && !iequals(c.args[1], "sync")) {
    return append_error(c.out, kSyntax);
  }
  c.store.flush();
  append_simple(c.out, "OK");
}

void cmd_select(Ctx& c) {
  const std::optional<std::int64_t> db = parse_int64(c.args[1]);
  if (!db) return append_error(c.out, kNotInteger);
  if (*db != 0) return append_error(c.out, "ERR DB index is out of range");
  append_simple(c.out, "OK");
}

void cmd_quit(Ctx& c) {
  c.session.close_after = true;
  append_simple(c.out, "OK");
}

struct ConfigParam {
  std::string_view name;
  std::string_view value;
};
// What redis-benchmark (save, appendonly) and common clients ask for, with this server's truth.
constexpr ConfigParam kConfig[] = {
    {"save", ""},
    {"appendonly", "no"},
    {"databases", "1"},
    {"maxmemory", "0"},
    {"maxmemory-policy", "noeviction"},
    {"timeout", "0"},
    {"maxclients", "0"},
    {"proto-max-bulk-len", "536870912"},
};

void cmd_config(Ctx& c) {
  const std::string sub = lower(c.args[1]);
  if (sub == "get") {
    if (c.args.size() < 3) return wrong_args(c, "config|get");
    std::vector<const ConfigParam*> hits;
    for (const ConfigParam& p : kConfig) {
      for (std::string_view pat : c.args.subspan(2)) {
        if (glob_match(lower(pat), p.name)) {
          hits.push_back(&p);
          break;
        }
      }
    }
    append_array_header(c.out, hits.size() * 2);
    for (const ConfigParam* p : hits) {
      append_bulk(c.out, p->name);
      append_bulk(c.out, p->value);
    }
  } else if (sub == "set") {
    if (c.args.size() < 4) return wrong_args(c, "config|set");
    append_error(c.out, "ERR Unknown option or number of arguments for CONFIG SET - '" +
                            std::string(c.args[2].substr(0, 128)) + "'");
  } else if (sub == "resetstat") {
    append_simple(c.out, "OK");
  } else {
    unknown_subcommand(c);
  }
}

void cmd_client(Ctx& c) {
  const std::string sub = lower(c.args[1]);
  if (sub == "setname") {
    if (c.args.size() != 3) return wrong_args(c, "client|setname");
    for (char ch : c.args[2]) {
      if (ch < '!' || ch > '~') {
        return append_error(c.out,
                            "ERR Client names cannot contain spaces, newlines or special "
                            "characters.");
      }
    }
    c.session.name = std::string(c.args[2]);
    append_simple(c.out, "OK");
  } else if (sub == "getname") {
    if (c.session.name.empty()) return append_nil(c.out);
    append_bulk(c.out, c.session.name);
  } else if (sub == "id") {
    append_int(c.out, static_cast<std::int64_t>(c.session.id));
  } else if (sub == "setinfo") {
    append_simple(c.out, "OK");
  } else {
    unknown_subcommand(c);
  }
}

void cmd_info(Ctx& c) {
  std::string s =
      "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nserver:weft-resp\r\n"
      "# Keyspace\r\n";
  const std::size_t keys = c.store.size();
  if (keys > 0) {
    s += "db0:keys=" + std::to_string(keys) +
         ",expires=" + std::to_string(c.store.volatile_size()) + ",avg_ttl=0\r\n";
  }
  append_bulk(c.out, s);
}

// HELLO [protover ...]: RESP2 only. Clients that try RESP3 first (HELLO 3) get NOPROTO, as from
// a Redis that lacks it, and carry on in RESP2.
void cmd_hello(Ctx& c) {
  if (c.args.size() >= 2) {
    const std::optional<std::int64_t> v = parse_int64(c.args[1]);
    if (!v) return append_error(c.out, "ERR Protocol version is not an integer or out of range");
    if (*v != 2)
      return append_error(c.out, "NOPROTO sorry, this protocol version is not supported");
  }
  for (std::size_t j = 2; j < c.args.size(); ++j) {
    if (iequals(c.args[j], "setname") && j + 1 < c.args.size()) {
      c.session.name = std::string(c.args[++j]);
    } else if (iequals(c.args[j], "auth") && j + 2 < c.args.size()) {
      j += 2;  // no users: any credentials are accepted, as with Redis's default user
    } else {
      return append_error(c.out, "ERR Syntax error in HELLO option '" +
                                     std::string(c.args[j].substr(0, 128)) + "'");
    }
  }
  append_array_header(c.out, 14);
  append_bulk(c.out, "server");
  append_bulk(c.out, "redis");
  append_bulk(c.out, "version");
  append_bulk(c.out, "7.0.0");
  append_bulk(c.out, "proto");
  append_int(c.out, 2);
  append_bulk(c.out, "id");
  append_int(c.out, static_cast<std::int64_t>(c.session.id));
  append_bulk(c.out, "mode");
  append_bulk(c.out, "standalone");
  append_bulk(c.out, "role");
  append_bulk(c.out, "master");
  append_bulk(c.out, "modules");
  append_array_header(c.out, 0);
}

struct Command {
  std::string_view name;
  int arity;  // Redis's convention: n exactly n arguments (name included), -n at least n
  void (*fn)(Ctx&);
};

void cmd_command(Ctx& c);

constexpr Command kCommands[] = {
    {"ping", -1, cmd_ping},     {"echo", 2, cmd_echo},          {"get", 2, cmd_get},
    {"set", -3, cmd_set},       {"del", -2, cmd_del},           {"exists", -2, cmd_exists},
    {"incr", 2, cmd_incr},      {"decr", 2, cmd_decr},          {"incrby", 3, cmd_incrby},
    {"decrby", 3, cmd_decrby},  {"mget", -2, cmd_mget},         {"mset", -3, cmd_mset},
    {"expire", -3, cmd_expire}, {"pexpire", -3, cmd_pexpire},   {"ttl", 2, cmd_ttl},
    {"pttl", 2, cmd_pttl},      {"persist", 2, cmd_persist},    {"keys", 2, cmd_keys},
    {"dbsize", 1, cmd_dbsize},  {"flushall", -1, cmd_flushall}, {"flushdb", -1, cmd_flushall},
    {"select", 2, cmd_select},  {"quit", -1, cmd_quit},         {"command", -1, cmd_command},
    {"config", -2, cmd_config}, {"client", -2, cmd_client},     {"info", -1, cmd_info},
    {"hello", -1, cmd_hello},
};

void cmd_command(Ctx& c) {
  if (c.args.size() == 1) return append_array_header(c.out, 0);
  const std::string sub = lower(c.args[1]);
  if (sub == "count") {
    append_int(c.out, static_cast<std::int64_t>(std::size(kCommands)));
  } else if (sub == "docs") {
    append_array_header(c.out, 0);  // no docs: redis-cli then gives no hints, and that is fine
  } else if (sub == "list") {
    append_array_header(c.out, std::size(kCommands));
    for (const Command& cmd : kCommands) append_bulk(c.out, cmd.name);
  } else if (sub == "info") {
    append_array_header(c.out, c.args.size() - 2);
    for (std::size_t i = 2; i < c.args.size(); ++i) append_array_header(c.out, 0);
  } else {
    unknown_subcommand(c);
  }
}

const absl::flat_hash_map<std::string_view, const Command*>& command_table() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string_view, const Command*>;
    for (const Command& c : kCommands) t->emplace(c.name, &c);
    return t;
  }();
  return *table;
}

void unknown_command(Store& store, std::span<const std::string_view> args, Session& session,
                     std::string* out) {
  (void)store;
  (void)session;
  std::string rest;
  for (std::size_t i = 1; i < args.size() && rest.size() < 128; ++i) {
    const std::size_t room = 128 - rest.size();
    rest += '\'';
    rest.append(args[i].substr(0, room));
    rest += "' ";
  }
  append_error(out, "ERR unknown command '" + std::string(args[0].substr(0, 128)) +
                        "', with args beginning with: " + rest);
}

}  // namespace

void execute(Store& store, std::span<const std::string_view> args, Session& session,
             std::string* out) {
  char name_buf[16];
  const std::string_view raw = args[0];
  if (raw.size() > sizeof name_buf) return unknown_command(store, args, session, out);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char ch = raw[i];
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    name_buf[i] = ch;
  }
  const std::string_view name(name_buf, raw.size());
  const auto& table = command_table();
  const auto it = table.find(name);
  if (it == table.end()) return unknown_command(store, args, session, out);
  const Command& cmd = *it->second;
  const auto n = static_cast<int>(std::min<std::size_t>(args.size(), 1 << 30));
  if ((cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity)) {
    return append_error(
        out, "ERR wrong number of arguments for '" + std::string(cmd.name) + "' command");
  }
  Ctx ctx{store, args, session, out, cmd.name};
  cmd.fn(ctx);
}

}  // namespace resp
