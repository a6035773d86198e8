// Grown rings; design in grown_rings.hpp.
#include "grown_rings.hpp"

#include <new>

#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/memory_return.hpp"
#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {
namespace {

struct GrownRings {
  ThreadMutex mu;
  IntrusiveList<GrownRingNode> list ABSL_GUARDED_BY(mu);
};

// Never destroyed: channels may be released during static destruction.
GrownRings& grown_rings() noexcept {
  static GrownRings* const rings = new GrownRings;
  return *rings;
}

}  // namespace

void list_grown_ring_locked(ChanCore* c) noexcept {
  if (c->ring_cap * c->ops->size < kListedRingBytes) return;
  register_memory_returner(&drop_empty_grown_rings);
  GrownRings& g = grown_rings();
  ThreadMutexLock lock(g.mu);
  // Under the mutex, not by ring_listed: a returner that just dropped this ring may not have
  // cleared the flag yet.
  if (c->ring_node.linked) return;
  c->ring_node.chan = c;
  g.list.push_back(&c->ring_node);
  c->ring_listed.store(true, std::memory_order_relaxed);
}

void unlist_grown_ring(ChanCore* c) noexcept {
  // False: never listed, or unlisted by a returner whose last touch of the channel was that
  // store (acquire pairs with it), so the caller may free the channel.
  if (!c->ring_listed.load(std::memory_order_acquire)) return;
  GrownRings& g = grown_rings();
  ThreadMutexLock lock(g.mu);
  if (c->ring_node.linked) g.list.remove(&c->ring_node);
}

void drop_empty_grown_rings() noexcept {
  GrownRings& g = grown_rings();
  ThreadMutexLock lock(g.mu);
  for (GrownRingNode* n = g.list.front(); n;) {
    GrownRingNode* const next = n->next;
    ChanCore* const c = n->chan;
    if (c->lock.try_lock()) {
      const bool empty = c->count.load(std::memory_order_relaxed) == 0;
      if (empty) {
        // A listed ring is a heap ring: rings that fit inline never grow.
        ::operator delete (static_cast<void*>(c->buf), std::align_val_t{ring_align(c->ops)});
        c->buf = nullptr;
        c->ring_cap = 0;
        c->recvx = c->sendx = 0;
        g.list.remove(n);
      }
      c->lock.unlock();
      // The last touch of the channel: once its last handle's release sees false it may free
      // the channel without the mutex (release: after the unlock above).
      if (empty) c->ring_listed.store(false, std::memory_order_release);
    }
    n = next;
  }
}

}  // namespace weft::detail
