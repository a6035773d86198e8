// select(): Go's select statement. Each case is built by case_recv / case_send / case_timeout /
// case_default; select() blocks until one case can proceed, runs that case's handler, and
// returns its 0-based position in the argument list.
//
//   weft::select(
//       weft::case_recv(jobs, [&](std::optional<Job> j) { ... }),  // nullopt: jobs is closed
//       weft::case_send(out, result, [&] { ... }),
//       weft::case_timeout(50ms, [&] { ... }),
//       weft::case_default([&] { ... }));                          // makes it non-blocking
//
// Among ready cases the choice is uniformly random (also between two cases on one channel).
// A case on a nil channel never fires, so `ch = nullptr` disables a case, as in Go. A send case
// that is chosen on a closed channel throws ChannelClosed. Handlers may be omitted; a receive
// handler takes std::optional<T> (or nothing). select() with no cases blocks forever.
// The scheduling is Go's selectgo, in the type-erased core (channels/src/select.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "weft/chan.hpp"
#include "weft/detail/chan_core.hpp"
#include "weft/detail/deadline.hpp"

namespace weft {
namespace detail {

struct NoHandler {};

template <class F, class... Args>
void invoke_handler(F& f, Args&&... args) {
  if constexpr (std::is_same_v<F, NoHandler>) {
    (void)f;
    ((void)args, ...);
  } else if constexpr (std::is_invocable_v<F&, Args...>) {
    f(std::forward<Args>(args)...);
  } else {
    static_assert(std::is_invocable_v<F&>,
                  "weft::select: a case handler must take the case's value or nothing");
    ((void)args, ...);
    f();
  }
}

template <class T, class F>
struct RecvCase {
  ChanCore* chan;
  F handler;
  RecvSlot<T> slot;
  SelectCase describe() noexcept {
    SelectCase c{SelectCase::kRecv};
    c.chan = chan;
    c.slot = slot.get();
    return c;
  }
  void fire(const SelectCase& c) {
    std::optional<T> v;
    if (c.received) v = slot.take();
    invoke_handler(handler, std::move(v));
  }
};

template <class T, class F>
struct SendCase {
  ChanCore* chan;
  T value;
  F handler;
  SelectCase describe() noexcept {
    SelectCase c{SelectCase::kSend};
    c.chan = chan;
    c.slot = &value;
    return c;
  }
  void fire(const SelectCase&) { invoke_handler(handler); }
};

template <class F>
struct TimeoutCase {
  std::chrono::nanoseconds after;
  F handler;
  SelectCase describe() noexcept {
    SelectCase c{SelectCase::kTimeout};
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    c.deadline_ns = deadline_after_ns(now, after.count());  // saturating: huge means never
    return c;
  }
  void fire(const SelectCase&) { invoke_handler(handler); }
};

template <class F>
struct DefaultCase {
  F handler;
  SelectCase describe() noexcept { return SelectCase{SelectCase::kDefault}; }
  void fire(const SelectCase&) { invoke_handler(handler); }
};

template <class C>
inline constexpr bool kIsDefaultCase = false;
template <class F>
inline constexpr bool kIsDefaultCase<DefaultCase<F>> = true;

}  // namespace detail

template <class T, class F = detail::NoHandler>
detail::RecvCase<T, std::decay_t<F>> case_recv(const Chan<T>& ch, F&& handler = {}) {
  return {detail::core_of(ch), std::forward<F>(handler), {}};
}

template <class T, class F = detail::NoHandler>
detail::RecvCase<T, std::decay_t<F>> case_recv(const RecvChan<T>& ch, F&& handler = {}) {
  return {detail::core_of(ch), std::forward<F>(handler), {}};
}

template <class T, class V, class F = detail::NoHandler>
requires std::constructible_from<T, V&&> detail::SendCase<T, std::decay_t<F>> case_send(
    const Chan<T>& ch, V&& value, F&& handler = {}) {
  return {detail::core_of(ch), T(std::forward<V>(value)), std::forward<F>(handler)};
}

template <class T, class V, class F = detail::NoHandler>
requires std::constructible_from<T, V&&> detail::SendCase<T, std::decay_t<F>> case_send(
    const SendChan<T>& ch, V&& value, F&& handler = {}) {
  return {detail::core_of(ch), T(std::forward<V>(value)), std::forward<F>(handler)};
}

template <class Rep, class Period, class F = detail::NoHandler>
detail::TimeoutCase<std::decay_t<F>> case_timeout(std::chrono::duration<Rep, Period> d,
                                                  F&& handler = {}) {
  return {std::chrono::duration_cast<std::chrono::nanoseconds>(d), std::forward<F>(handler)};
}

template <class F = detail::NoHandler>
detail::DefaultCase<std::decay_t<F>> case_default(F&& handler = {}) {
  return {std::forward<F>(handler)};
}

template <class... Cases>
std::size_t select(Cases&&... cases) {
  constexpr std::size_t n = sizeof...(Cases);
  static_assert((0 + ... + (detail::kIsDefaultCase<std::decay_t<Cases>> ? 1 : 0)) <= 1,
                "weft::select: at most one case_default");
  if constexpr (n == 0) {
    detail::select_run(nullptr, 0);  // blocks forever, like Go's `select {}`
    return 0;
  } else {
    detail::SelectCase described[n] = {cases.describe()...};
    const std::size_t chosen = detail::select_run(described, n);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((I == chosen ? cases.fire(described[I]) : void()), ...);
    }
    (std::make_index_sequence<n>{});
    return chosen;
  }
}

}  // namespace weft
