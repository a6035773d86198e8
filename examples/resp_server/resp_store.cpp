#include "resp_store.hpp"

#include <absl/hash/hash.h>

#include <bit>
#include <chrono>
#include <limits>

#include "resp_parser.hpp"

namespace resp {

namespace {
// Debian's abseil is built with its own absl::string_view, which is not std::string_view: the
// map's heterogeneous lookup and absl::Hash take the former.
absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace

std::int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::size_t Store::shard_index(std::string_view key) {
  // The top bits: flat_hash_map places keys with the low and middle bits of the same hash, so
  // these stay independent of the in-shard position.
  static_assert(kShards == 64);
  return absl::Hash<absl::string_view>{}(av(key)) >> 58;
}

class Store::MultiLock {
 public:
  MultiLock(Store& st, std::span<const std::string_view> keys, std::size_t stride) : st_(st) {
    for (std::size_t i = 0; i < keys.size(); i += stride) {
      mask_ |= std::uint64_t{1} << shard_index(keys[i]);
    }
    for (std::uint64_t m = mask_; m != 0; m &= m - 1) st_.shards_[std::countr_zero(m)].mu.lock();
  }
  ~MultiLock() {
    for (std::uint64_t m = mask_; m != 0; m &= m - 1) {
      st_.shards_[std::countr_zero(m)].mu.unlock();
    }
  }
  MultiLock(const MultiLock&) = delete;
  MultiLock& operator=(const MultiLock&) = delete;

 private:
  Store& st_;
  std::uint64_t mask_ = 0;
};

Store::Entry* Store::find_live(Shard& s, std::string_view key) {
  auto it = s.map.find(av(key));
  if (it == s.map.end()) return nullptr;
  if (it->second.expire_at != 0 && it->second.expire_at <= now_()) {
    erase(s, it);
    return nullptr;
  }
  return &it->second;
}

void Store::erase(Shard& s, absl::flat_hash_map<std::string, Entry>::iterator it) {
  if (it->second.expire_at != 0) --s.volatile_keys;
  s.map.erase(it);
}

void Store::set_deadline(Shard& s, std::string_view key, Entry& e, std::int64_t at) {
  if (e.expire_at == 0 && at != 0) ++s.volatile_keys;
  if (e.expire_at != 0 && at == 0) --s.volatile_keys;
  e.expire_at = at;
  if (at == 0) return;
  s.deadlines.emplace(at, std::string(key));
  if (s.deadlines.size() > 2 * s.volatile_keys + 1024) {
    // Mostly stale deadlines (keys re-expired or deleted): rebuild from the live entries.
    std::vector<Deadline> fresh;
    fresh.reserve(s.volatile_keys);
    for (const auto& [k, v] : s.map) {
      if (v.expire_at != 0) fresh.emplace_back(v.expire_at, k);
    }
    s.deadlines = decltype(s.deadlines)(std::greater<>{}, std::move(fresh));
  }
}

Store::SetResult Store::set(std::string_view key, std::string_view value, const SetOptions& opts) {
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  SetResult r;
  Entry* e = find_live(s, key);
  if (opts.get_old && e != nullptr) {
    r.had_old = true;
    r.old = e->value;
  }
  if ((opts.cond == SetCond::kIfMissing && e != nullptr) ||
      (opts.cond == SetCond::kIfExists && e == nullptr)) {
    return r;
  }
  if (e == nullptr) e = &s.map.try_emplace(av(key)).first->second;
  e->value.assign(value.data(), value.size());
  if (!opts.keep_ttl) set_deadline(s, key, *e, opts.expire_at_ms);
  r.done = true;
  return r;
}

bool Store::exists(std::string_view key) {
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  return find_live(s, key) != nullptr;
}

std::size_t Store::del(std::span<const std::string_view> keys) {
  MultiLock lock(*this, keys, 1);
  std::size_t n = 0;
  for (std::string_view key : keys) {
    Shard& s = shard_of(key);
    if (find_live(s, key) != nullptr) {
      erase(s, s.map.find(av(key)));
      ++n;
    }
  }
  return n;
}

Store::IncrStatus Store::incr_by(std::string_view key, std::int64_t delta, std::int64_t* result) {
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  Entry* e = find_live(s, key);
  std::int64_t old = 0;
  if (e != nullptr) {
    const std::optional<std::int64_t> v = parse_int64(e->value);
    if (!v) return IncrStatus::kNotInteger;
    old = *v;
  }
  if ((delta < 0 && old < 0 && delta < std::numeric_limits<std::int64_t>::min() - old) ||
      (delta > 0 && old > 0 && delta > std::numeric_limits<std::int64_t>::max() - old)) {
    return IncrStatus::kOverflow;
  }
  *result = old + delta;
  if (e == nullptr) e = &s.map.try_emplace(av(key)).first->second;
  e->value = std::to_string(*result);
  return IncrStatus::kOk;
}

bool Store::expire_at(std::string_view key, std::int64_t at_ms, ExpireCond cond) {
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  Entry* e = find_live(s, key);
  if (e == nullptr) return false;
  const std::int64_t cur = e->expire_at;  // 0: persistent, an infinite TTL for GT and LT
  switch (cond) {
    case ExpireCond::kAlways:
      break;
    case ExpireCond::kNx:
      if (cur != 0) return false;
      break;
    case ExpireCond::kXx:
      if (cur == 0) return false;
      break;
    case ExpireCond::kGt:
      if (cur == 0 || at_ms <= cur) return false;
      break;
    case ExpireCond::kLt:
      if (cur != 0 && at_ms >= cur) return false;
      break;
  }
  if (at_ms <= now_()) {
    erase(s, s.map.find(av(key)));
    return true;
  }
  set_deadline(s, key, *e, at_ms);
  return true;
}

std::int64_t Store::pttl(std::string_view key) {
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  const Entry* e = find_live(s, key);
  if (e == nullptr) return -2;
  if (e->expire_at == 0) return -1;
  return std::max<std::int64_t>(0, e->expire_at - now_());
}

bool Store::persist(std::string_view key) {
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  Entry* e = find_live(s, key);
  if (e == nullptr || e->expire_at == 0) return false;
  set_deadline(s, key, *e, 0);
  return true;
}

void Store::mset(std::span<const std::string_view> kv) {
  MultiLock lock(*this, kv, 2);
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
    Shard& s = shard_of(kv[i]);
    Entry& e = s.map.try_emplace(av(kv[i])).first->second;
    e.value.assign(kv[i + 1].data(), kv[i + 1].size());
    set_deadline(s, kv[i], e, 0);
  }
}

void Store::mget(std::span<const std::string_view> keys,
                 const std::function<void(std::size_t, const std::string*)>& f) {
  MultiLock lock(*this, keys, 1);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const Entry* e = find_live(shard_of(keys[i]), keys[i]);
    f(i, e ? &e->value : nullptr);
  }
}

void Store::for_each_key(const std::function<void(const std::string&)>& f) {
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    const std::int64_t now = now_();
    for (const auto& [k, v] : s.map) {
      if (v.expire_at == 0 || v.expire_at > now) f(k);
    }
  }
}

void Store::flush() {
  for (Shard& s : shards_) {
    absl::flat_hash_map<std::string, Entry> map;
    decltype(s.deadlines) deadlines;
    {
      std::lock_guard lock(s.mu);
      map.swap(s.map);
      deadlines.swap(s.deadlines);
      s.volatile_keys = 0;
    }
    // map and deadlines are freed here, outside the lock.
  }
}

std::size_t Store::size() {
  std::size_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.map.size();
  }
  return n;
}

std::size_t Store::volatile_size() {
  std::size_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.volatile_keys;
  }
  return n;
}

std::size_t Store::sweep(std::size_t budget) {
  std::size_t removed = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    const std::int64_t now = now_();
    std::size_t n = 0;
    while (n < budget && !s.deadlines.empty() && s.deadlines.top().first <= now) {
      const Deadline d = s.deadlines.top();
      s.deadlines.pop();
      auto it = s.map.find(av(d.second));
      if (it != s.map.end() && it->second.expire_at == d.first) {
        erase(s, it);
        ++n;
      }
    }
    removed += n;
  }
  return removed;
}

namespace {

// Matches one pattern atom at pattern[p] (not '*') against c; *next gets the following atom.
bool match_atom(std::string_view pat, std::size_t p, char c, std::size_t* next) {
  const std::size_t n = pat.size();
  switch (pat[p]) {
    case '?':
      *next = p + 1;
      return true;
    case '[': {
      std::size_t i = p + 1;
      const bool negate = i < n && pat[i] == '^';
      if (negate) ++i;
      bool match = false;
      for (;;) {
        if (i >= n) break;  // unterminated: the class runs to the end (as Redis)
        if (pat[i] == '\\' && i + 1 < n) {
          ++i;
          if (pat[i] == c) match = true;
        } else if (pat[i] == ']') {
          break;
        } else if (i + 2 < n && pat[i + 1] == '-') {
          auto lo = static_cast<unsigned char>(pat[i]);
          auto hi = static_cast<unsigned char>(pat[i + 2]);
          if (lo > hi) std::swap(lo, hi);
          const auto uc = static_cast<unsigned char>(c);
          if (uc >= lo && uc <= hi) match = true;
          i += 2;
        } else if (pat[i] == c) {
          match = true;
        }
        ++i;
      }
      *next = i < n ? i + 1 : n;
      return negate ? !match : match;
    }
    case '\\':
      if (p + 1 < n) {
        *next = p + 2;
        return pat[p + 1] == c;
      }
      *next = p + 1;
      return c == '\\';
    default:
      *next = p + 1;
      return pat[p] == c;
  }
}

}  // namespace

bool glob_match(std::string_view pat, std::string_view str) {
  constexpr std::size_t kNone = std::string_view::npos;
  std::size_t p = 0, s = 0;
  std::size_t star_p = kNone, star_s = 0;  // where to resume after the last '*'
  while (s < str.size()) {
    if (p < pat.size() && pat[p] == '*') {
      while (p < pat.size() && pat[p] == '*') ++p;
      if (p == pat.size()) return true;
      star_p = p;
      star_s = s;
      continue;
    }
    std::size_t next = 0;
    if (p < pat.size() && match_atom(pat, p, str[s], &next)) {
      p = next;
      ++s;
      continue;
    }
    if (star_p == kNone) return false;
    p = star_p;  // let the last '*' swallow one more character
    s = ++star_s;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

}  // namespace resp
