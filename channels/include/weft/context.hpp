// weft::Context: Go's context.Context -- cancellation, deadlines and request-scoped values that
// flow from a caller to everything it starts.
//
//   auto [ctx, cancel] = weft::with_timeout(parent, std::chrono::milliseconds(50));
//   weft::select(weft::case_recv(ctx.done()),                 // cancelled or past its deadline
//                weft::case_recv(results, [&](auto r) { ... }));
//   if (!ctx.err().ok()) return ctx.err();                    // kCancelled or kDeadlineExceeded
//   cancel();                                                 // idempotent; children go too
//
// A Context is a cheap handle (a shared pointer); copies share one context, and it stays valid
// as long as any copy, child or CancelFunc holds it. Contexts form a tree: cancelling one cancels
// its descendants, never its parent; a child's deadline is never later than its parent's. All
// operations are thread-safe and may be called from fibers or plain threads; with_deadline and
// with_timeout need a running weft runtime for their timer (std::logic_error otherwise), unless
// the deadline has already passed.
#pragma once

#include <absl/status/status.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include "weft/cancel.hpp"
#include "weft/chan.hpp"

namespace weft {

// A key for with_value / Context::value, compared by identity (its address), as Go recommends
// unexported key types for: `static const weft::ContextKey<RequestId> kRequestId;`.
template <class T>
class ContextKey {
 public:
  constexpr ContextKey() = default;
  ContextKey(const ContextKey&) = delete;
  ContextKey& operator=(const ContextKey&) = delete;
};

namespace detail {
struct ContextNode;
struct ContextAccess;  // context.cpp: builds handles from nodes
const void* context_value(const ContextNode* node, const void* key) noexcept;
}  // namespace detail

class Context {
 public:
  Context() = default;  // background: never done, no deadline, no values

  // Closed once the context is cancelled or its deadline passed; for select (case_recv) or
  // recv(). The background context's never closes.
  RecvChan<std::monostate> done() const;
  // OK while live; then kCancelled (cancel() of this context or an ancestor) or
  // kDeadlineExceeded (its deadline, or an ancestor's, passed), and that never changes again.
  absl::Status err() const;
  // The earliest deadline of this context and its ancestors, if any has one.
  std::optional<std::chrono::steady_clock::time_point> deadline() const;
  // The value with_value attached for `key` to this context or its nearest ancestor that has
  // one; nullptr if none did.
  template <class T>
  const T* value(const ContextKey<T>& key) const {
    return static_cast<const T*>(detail::context_value(node_.get(), &key));
  }
  // Bounds a wait by this context: `mu.lock(ctx)`, `sem.acquire(ctx)`, `task.wait(ctx)` (see
  // weft/cancel.hpp). The token refers to this context, which must outlive the wait.
  operator CancelToken() const noexcept;  // NOLINT(google-explicit-constructor): by design

 private:
  friend struct detail::ContextAccess;
  std::shared_ptr<detail::ContextNode> node_;  // null: background
};

// Cancels the context it came with (and its descendants) with kCancelled. Idempotent; safe from
// any thread; keeps nothing alive but that context.
class CancelFunc {
 public:
  CancelFunc() = default;
  void operator()() const;

 private:
  friend struct detail::ContextAccess;
  std::shared_ptr<detail::ContextNode> node_;
};

inline Context background() { return Context(); }

// Each returns {child, cancel}: `auto [ctx, cancel] = weft::with_cancel(parent);`.
std::pair<Context, CancelFunc> with_cancel(const Context& parent);
// Also cancelled, with kDeadlineExceeded, at `t` (or at once if `t` has passed).
std::pair<Context, CancelFunc> with_deadline(const Context& parent,
                                             std::chrono::steady_clock::time_point t);
std::pair<Context, CancelFunc> with_timeout(const Context& parent, std::chrono::nanoseconds d);

// Go 1.21's context.AfterFunc: once `ctx` is cancelled (or its deadline passes), f runs in a
// fiber of its own (go(f)); at once if ctx is already done. Calling the returned stop function
// before that unregisters f and returns true; afterwards (f started, or stop already called) it
// returns false. f, and the context it waits on, are kept alive until f has started or stop was
// called. If no runtime is running when ctx is cancelled, f runs on the cancelling thread. The
// background context is never done: f never runs.
class AfterFuncStop {
 public:
  AfterFuncStop() = default;
  bool operator()() const;

 private:
  friend AfterFuncStop after_func(const Context& ctx, std::function<void()> f);
  std::shared_ptr<void> rec_;
};
AfterFuncStop after_func(const Context& ctx, std::function<void()> f);

// A child that carries `value` under `key` (and everything else of its parent).
Context context_with_value(const Context& parent, const void* key,
                           std::shared_ptr<const void> value);
template <class T>
Context with_value(const Context& parent, const ContextKey<T>& key, T value) {
  return context_with_value(parent, &key, std::make_shared<const T>(std::move(value)));
}

}  // namespace weft
