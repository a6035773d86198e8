// Context (weft/context.hpp): a tree of nodes, parents owned by children.
//
// Node kinds. A cancel node (with_cancel / with_deadline) owns a done channel (made by the first
// done()), an error state and
// its live children; a value node (with_value) only adds a key and a value and delegates
// done/err/deadline to its nearest cancel ancestor (`owner`, null when only background is above).
//
// Who owns what. A child holds its parent strongly (values and the owner chain stay valid); a
// parent knows its cancellable descendants weakly, in `children` (guarded by `mu`), keyed by node
// address so a child can remove itself when it is cancelled or destroyed: a long-lived parent
// (a server's context) does not accumulate its finished requests' children. `mu` is a SpinLock:
// cancel may run in a timer callback, which must not block; no code holds two nodes' locks at once.
//
// Cancellation. A cancel node embeds a CancelSignal (weft/detail/cancel_signal.hpp), whose state
// goes live -> cancelled or deadline once (CAS) and which bounded waits (mu.lock(ctx), ...) and
// after_func attach to. The winner of fire() runs those callbacks, then closes `done`, detaches
// the children under `mu`, cancels each one still alive (outside `mu`) with the same error, and
// leaves its own parent's children. A child created under an already cancelled owner is
// cancelled before it is returned.
//
// Deadlines. A node's deadline is min(own, owner's); it arms a runtime timer only when its own is
// the earlier (otherwise the owner's cancellation reaches it). The timer's callback cancels with
// kDeadlineExceeded; the node's destructor disarms it (timer_cancel waits for a running callback,
// which never drops the last reference to its own node: the destructor is what would run it).
#include "weft/context.hpp"

#include <atomic>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/detail/cancel_signal.hpp"
#include "weft/detail/deadline.hpp"
#include "weft/detail/park.hpp"
#include "weft/detail/spin_lock.hpp"
#include "weft/runtime.hpp"

namespace weft {
namespace detail {

struct ContextNode {
  using State = CancelSignal::Why;
  static constexpr State kLive = CancelSignal::kLive;
  static constexpr State kCancelled = CancelSignal::kCancelled;
  static constexpr State kDeadline = CancelSignal::kDeadline;

  std::shared_ptr<ContextNode> parent;
  ContextNode* owner = nullptr;  // nearest cancel node: this one, or an ancestor; null: none
  // Value nodes.
  const void* key = nullptr;
  std::shared_ptr<const void> value;
  // Cancel nodes.
  bool cancellable = false;
  std::int64_t deadline_ns = 0;  // effective (min with the owner's); 0: none
  CancelSignal signal;  // cancel nodes: the state (live, cancelled, deadline) and its waiters
  // Cancel nodes: made by the first done() (Go makes its done channel lazily too: a context whose
  // done() nobody asks for costs no channel), closed on cancellation, never sent on. Written
  // under `mu` once; `has_done` publishes it to done()'s lock-free fast path.
  Chan<std::monostate> done ABSL_GUARDED_BY(mu){nullptr};
  std::atomic<bool> has_done{false};
  bool done_closed ABSL_GUARDED_BY(mu) = false;  // whoever closes it (cancel or done()) sets it
  SpinLock mu;
  std::unordered_map<ContextNode*, std::weak_ptr<ContextNode>> children ABSL_GUARDED_BY(mu);
  TimerEntry timer;
  bool timer_armed = false;

  ~ContextNode() {
    if (timer_armed) timer_cancel(&timer);
    if (cancellable) leave_owner_above();
  }

  // The cancel node above this one (its parent's owner), which lists this node as a child.
  ContextNode* owner_above() const noexcept { return parent ? parent->owner : nullptr; }

  void leave_owner_above() noexcept {
    if (ContextNode* up = owner_above()) {
      up->mu.lock();
      up->children.erase(this);
      // A server's context after a burst of connections: its buckets would stay sized for the
      // burst. At an eighth full, so the cost stays amortised O(1).
      if (up->children.bucket_count() > 1024 &&
          up->children.size() * 8 < up->children.bucket_count()) {
        up->children.rehash(0);
      }
      up->mu.unlock();
    }
  }

  int state() const noexcept { return signal.why(); }

  // The done channel, made on first use (closed at once if the node is cancelled already).
  RecvChan<std::monostate> done_chan() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (has_done.load(std::memory_order_acquire)) return done;  // never written again
    mu.lock();
    if (!has_done.load(std::memory_order_relaxed)) {
      done = Chan<std::monostate>();
      if (state() != kLive) {  // cancel() found no channel to close: close it here
        done.close();
        done_closed = true;
      }
      has_done.store(true, std::memory_order_release);
    }
    mu.unlock();
    return done;
  }

  void cancel(State why) noexcept {
    if (!signal.fire(why)) return;
    mu.lock();
    std::unordered_map<ContextNode*, std::weak_ptr<ContextNode>> kids;
    kids.swap(children);
    Chan<std::monostate> to_close(nullptr);
    if (has_done.load(std::memory_order_relaxed) && !done_closed) {
      done_closed = true;
      to_close = done;
    }
    mu.unlock();
    if (to_close) to_close.close();
    for (auto& [raw, weak] : kids) {
      if (std::shared_ptr<ContextNode> child = weak.lock()) child->cancel(why);
    }
    leave_owner_above();
  }

  static absl::Status status_of(int s) {
    switch (s) {
      case kCancelled:
        return absl::CancelledError("context canceled");
      case kDeadline:
        return absl::DeadlineExceededError("context deadline exceeded");
      default:
        return absl::OkStatus();
    }
  }
};

const void* context_value(const ContextNode* node, const void* key) noexcept {
  for (; node; node = node->parent.get()) {
    if (node->key == key) return node->value.get();
  }
  return nullptr;
}

struct ContextAccess {
  static Context make(std::shared_ptr<ContextNode> n) {
    Context c;
    c.node_ = std::move(n);
    return c;
  }
  static const std::shared_ptr<ContextNode>& node(const Context& c) { return c.node_; }
  static CancelFunc cancel_func(std::shared_ptr<ContextNode> n) {
    CancelFunc f;
    f.node_ = std::move(n);
    return f;
  }
  static const std::shared_ptr<ContextNode>& node(const CancelFunc& f) { return f.node_; }

  // A new cancel node under `parent`, with its own deadline `deadline_ns` (0: none).
  static std::pair<Context, CancelFunc> new_cancel_node(const Context& parent,
                                                        std::int64_t deadline_ns) {
    auto n = std::make_shared<ContextNode>();
    n->parent = node(parent);
    n->cancellable = true;
    n->owner = n.get();
    ContextNode* up = n->owner_above();
    const std::int64_t inherited = up ? up->deadline_ns : 0;
    const bool own_is_earlier = deadline_ns != 0 && (inherited == 0 || deadline_ns < inherited);
    n->deadline_ns = own_is_earlier ? deadline_ns : inherited;
    if (up) {
      up->mu.lock();
      const int s = up->state();
      if (s == ContextNode::kLive) up->children.emplace(n.get(), n);
      up->mu.unlock();
      if (s != ContextNode::kLive) n->cancel(static_cast<ContextNode::State>(s));
    }
    if (own_is_earlier && n->state() == ContextNode::kLive) {
      if (deadline_ns <= now_ns()) {
        n->cancel(ContextNode::kDeadline);
      } else {
        n->timer.when_ns = deadline_ns;
        n->timer.fire = [](TimerEntry* t) {
          auto* node = reinterpret_cast<ContextNode*>(reinterpret_cast<char*>(t) -
                                                      offsetof(ContextNode, timer));
          node->cancel(ContextNode::kDeadline);
        };
        timer_add(&n->timer);  // throws std::logic_error without a runtime
        n->timer_armed = true;
      }
    }
    return {make(n), cancel_func(n)};
  }
};

}  // namespace detail

namespace {
using detail::ContextAccess;
using detail::ContextNode;

const ContextNode* owner_of(const Context& c) {
  const auto& n = ContextAccess::node(c);
  return n ? n->owner : nullptr;
}
}  // namespace

RecvChan<std::monostate> Context::done() const {
  const auto& n = ContextAccess::node(*this);
  if (n && n->owner) return n->owner->done_chan();
  return nullptr;  // the nil channel: a select case on it never fires, as Go's Background
}

absl::Status Context::err() const {
  const ContextNode* o = owner_of(*this);
  return o ? ContextNode::status_of(o->state()) : absl::OkStatus();
}

std::optional<std::chrono::steady_clock::time_point> Context::deadline() const {
  const ContextNode* o = owner_of(*this);
  if (!o || o->deadline_ns == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(o->deadline_ns));
}

Context::operator CancelToken() const noexcept {
  const auto& n = ContextAccess::node(*this);
  return n && n->owner ? CancelToken::from_signal(&n->owner->signal) : CancelToken();
}

void CancelFunc::operator()() const {
  if (const auto& n = ContextAccess::node(*this)) n->cancel(ContextNode::kCancelled);
}

std::pair<Context, CancelFunc> with_cancel(const Context& parent) {
  return ContextAccess::new_cancel_node(parent, 0);
}

std::pair<Context, CancelFunc> with_deadline(const Context& parent,
                                             std::chrono::steady_clock::time_point t) {
  std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  if (ns <= 0) ns = 1;  // a time at or before the clock's epoch has passed; 0 means "none"
  return ContextAccess::new_cancel_node(parent, ns);
}

std::pair<Context, CancelFunc> with_timeout(const Context& parent, std::chrono::nanoseconds d) {
  return with_deadline(parent, detail::deadline_after(d));
}

namespace {

// after_func's registration: a callback on the owner's signal. It owns itself (`self`) from
// registration until it fired or stop() detached it, and holds the node so the signal outlives it.
struct AfterFuncRecord : detail::CancelCallback {
  std::function<void()> f;
  std::shared_ptr<ContextNode> node;
  std::shared_ptr<AfterFuncRecord> self;
  std::atomic<bool> claimed{false};  // by the firing callback or by stop(), whichever is first

  static void run(detail::CancelCallback* cb) noexcept {
    auto* r = static_cast<AfterFuncRecord*>(cb);
    if (r->claimed.exchange(true, std::memory_order_acq_rel)) return;
    std::function<void()> f = std::move(r->f);
    // The node reference goes to the new fiber, never dropped here: this may be the node's own
    // deadline timer callback, and the node's destructor waits for that callback to return.
    std::shared_ptr<ContextNode> node = std::move(r->node);
    std::shared_ptr<AfterFuncRecord> keep = std::move(r->self);  // the record goes at the end
    auto job = [f = std::move(f), node = std::move(node)] {
      if (f) f();
    };
    try {
      weft::go(std::move(job));  // moves job only once the fiber exists
    } catch (const std::logic_error&) {
      // No runtime is running (cancelled from a plain thread after run() returned, say): no timer
      // callback is running either, and the canceller holds the node.
      job();
    }
  }
};

}  // namespace

AfterFuncStop after_func(const Context& ctx, std::function<void()> f) {
  AfterFuncStop stop;
  const auto& n = ContextAccess::node(ctx);
  if (!n || !n->owner) return stop;  // background: never done
  auto rec = std::make_shared<AfterFuncRecord>();
  rec->fire = &AfterFuncRecord::run;
  rec->f = std::move(f);
  // Hold the owner through the node chain (n holds its ancestors, the owner among them).
  rec->node = n;
  rec->self = rec;
  stop.rec_ = rec;
  if (!n->owner->signal.attach(rec.get())) AfterFuncRecord::run(rec.get());  // already done
  return stop;
}

bool AfterFuncStop::operator()() const {
  auto* r = static_cast<AfterFuncRecord*>(rec_.get());
  if (!r || r->claimed.exchange(true, std::memory_order_acq_rel)) return false;
  r->node->owner->signal.detach(r);
  r->f = nullptr;
  r->node.reset();
  r->self.reset();  // may free the record; rec_ still holds it
  return true;
}

Context context_with_value(const Context& parent, const void* key,
                           std::shared_ptr<const void> value) {
  auto n = std::make_shared<ContextNode>();
  n->parent = ContextAccess::node(parent);
  n->owner = n->parent ? n->parent->owner : nullptr;
  n->key = key;
  n->value = std::move(value);
  return ContextAccess::make(std::move(n));
}

}  // namespace weft
