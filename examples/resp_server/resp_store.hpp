// The key-value store behind resp_server: string keys to string values with optional expiry,
// in 64 shards, each an absl::flat_hash_map behind its own mutex.
//
// Why a thread mutex (std::mutex) and not weft::Mutex or a fiber per shard: every critical
// section is a hash-map operation that never blocks or parks, so holding a kernel lock across it
// is safe in a fiber and cheaper than any hand-off; a fiber per shard would put two channel hops
// and two context switches on every GET. It also keeps the store usable without the runtime, so
// the command fuzzer drives it directly.
//
// Expiry is Redis's: lazy (an access to an expired key deletes it) plus active (sweep(), which
// the server calls from a Ticker fiber, pops each shard's heap of deadlines). Times are
// milliseconds from a monotonic clock; TTL/EXPIRE semantics are relative, so nothing depends on
// the wall clock.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resp {

using NowFn = std::int64_t (*)();
// Milliseconds on std::chrono::steady_clock.
std::int64_t steady_now_ms();

class Store {
 public:
  static constexpr std::size_t kShards = 64;

  explicit Store(NowFn now = &steady_now_ms) : now_(now) {}
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  std::int64_t now_ms() const { return now_(); }

  // Calls f(const std::string& value) under the key's shard lock; false (f not called) if the
  // key does not exist.
  template <class F>
  bool view(std::string_view key, F&& f) {
    Shard& s = shard_of(key);
    std::lock_guard lock(s.mu);
    const Entry* e = find_live(s, key);
    if (e == nullptr) return false;
    std::forward<F>(f)(e->value);
    return true;
  }

  enum class SetCond { kAlways, kIfMissing /* NX */, kIfExists /* XX */ };
  struct SetOptions {
    SetCond cond = SetCond::kAlways;
    std::int64_t expire_at_ms = 0;  // 0: no expiry (the key's TTL is cleared unless keep_ttl)
    bool keep_ttl = false;
    bool get_old = false;  // fill SetResult::old
  };
  struct SetResult {
    bool done = false;     // the value was stored
    bool had_old = false;  // the key existed (filled only with get_old)
    std::string old;
  };
  SetResult set(std::string_view key, std::string_view value, const SetOptions& opts);

  bool exists(std::string_view key);
  // Deletes each key; returns how many existed. Atomic across shards.
  std::size_t del(std::span<const std::string_view> keys);

  enum class IncrStatus { kOk, kNotInteger, kOverflow };
  // Adds delta to the integer in key (missing counts as 0); keeps the key's TTL.
  IncrStatus incr_by(std::string_view key, std::int64_t delta, std::int64_t* result);

  enum class ExpireCond { kAlways, kNx, kXx, kGt, kLt };
  // Sets key's deadline to at_ms (Redis's EXPIRE with NX/XX/GT/LT, a persistent key counting as
  // an infinite TTL). A deadline not in the future deletes the key. Returns whether it applied
  // (the integer EXPIRE replies).
  bool expire_at(std::string_view key, std::int64_t at_ms, ExpireCond cond);
  // -2: no such key; -1: no expiry; else milliseconds left (at least 0).
  std::int64_t pttl(std::string_view key);
  // Removes the key's expiry; true if it had one.
  bool persist(std::string_view key);

  // kv alternates key, value. Atomic: no reader sees some of the pairs and not others.
  void mset(std::span<const std::string_view> kv);
  // Calls f(i, const std::string* value_or_null) for each key, in order, atomically.
  void mget(std::span<const std::string_view> keys,
            const std::function<void(std::size_t, const std::string*)>& f);

  // Calls f(const std::string& key) for every live key (shard by shard, each under its lock).
  void for_each_key(const std::function<void(const std::string&)>& f);
  void flush();
  // Keys stored, expired ones not yet removed included (Redis's DBSIZE counts those too).
  std::size_t size();
  // Keys with an expiry (approximate: counts expired keys not yet removed).
  std::size_t volatile_size();
  // Active expiry: removes up to `budget` expired keys per shard; returns how many it removed.
  std::size_t sweep(std::size_t budget);

 private:
  struct Entry {
    std::string value;
    std::int64_t expire_at = 0;  // 0: none
  };
  using Deadline = std::pair<std::int64_t, std::string>;
  struct alignas(64) Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Entry> map;
    // Deadlines of keys, soonest first; stale ones (key gone, or deadline changed) are skipped
    // when popped, and the heap is rebuilt when they outnumber the live keys.
    std::priority_queue<Deadline, std::vector<Deadline>, std::greater<>> deadlines;
    std::size_t volatile_keys = 0;
  };

  static std::size_t shard_index(std::string_view key);
  Shard& shard_of(std::string_view key) { return shards_[shard_index(key)]; }
  // The key's entry, or nullptr if missing or expired (an expired entry is erased). s locked.
  Entry* find_live(Shard& s, std::string_view key);
  // Sets an entry's deadline, keeping volatile_keys and the heap up to date. s locked.
  void set_deadline(Shard& s, std::string_view key, Entry& e, std::int64_t at);
  void erase(Shard& s, absl::flat_hash_map<std::string, Entry>::iterator it);
  // Locks the shards of all keys (stride apart in `keys`), in index order.
  class MultiLock;

  NowFn now_;
  std::array<Shard, kShards> shards_;
};

// Redis's glob (stringmatchlen): * ? [abc] [^abc] [a-z] and \ escapes. Linear-time matching
// (backtracking only to the last '*'), so no pattern can make KEYS take exponential time.
bool glob_match(std::string_view pattern, std::string_view str);

}  // namespace resp
