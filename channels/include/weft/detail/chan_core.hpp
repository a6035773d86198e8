// The type-erased channel core behind Chan<T> and select(). Everything that schedules (wait
// queues, hand-off, close, select) lives in channels/src once, for every T; the typed layer only
// supplies how to move and destroy a T (ElemOps) and where values live (slots).
//
// Slots: a send's slot holds a constructed T that the core moves FROM (it stays constructed,
// moved-from, and the caller destroys it); a receive's slot is raw storage that the core
// constructs a T INTO when, and only when, the result is kOk.
//
// Values are moved while the channel's lock is held, so T's move constructor and destructor must
// not throw (Chan<T> checks this at compile time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace weft {

// Go's "send on closed channel" / "close of closed channel" panics.
struct ChannelClosed : std::logic_error {
  using std::logic_error::logic_error;
};

namespace detail {

struct ElemOps {
  void (*move_construct)(void* dst, void* src) noexcept;  // null: trivially copyable, memcpy
  void (*destroy)(void* p) noexcept;                      // null: trivially destructible
  std::size_t size;
  std::size_t align;
};

template <class T>
inline constexpr ElemOps kElemOps = {
    std::is_trivially_copyable_v<T>
        ? nullptr
        : +[](void* dst, void* src) noexcept { ::new (dst) T(std::move(*static_cast<T*>(src))); },
    std::is_trivially_destructible_v<T> ? nullptr
                                        : +[](void* p) noexcept { static_cast<T*>(p)->~T(); },
    sizeof(T), alignof(T)};

class ChanCore;  // opaque; defined in channels/src/chan_core.hpp

enum class ChanResult : std::uint8_t {
  kOk,          // done: the value was handed over / received
  kWouldBlock,  // non-blocking op only: nothing happened
  kClosed,      // send: the channel is closed (value untouched); recv: closed and drained
};

// capacity 0: unbuffered. Throws std::bad_alloc.
ChanCore* chan_make(std::size_t capacity, const ElemOps* ops);
void chan_retain(ChanCore* c) noexcept;
void chan_release(ChanCore* c) noexcept;  // the last release destroys buffered values

// c == nullptr is the nil channel: a blocking op on it parks forever; a non-blocking one returns
// kWouldBlock. Blocking ops work from fibers and from plain threads (which block).
ChanResult chan_send(ChanCore* c, void* src, bool block);
ChanResult chan_recv(ChanCore* c, void* dst, bool block);
// Throws ChannelClosed when already closed, std::logic_error for nil.
void chan_close(ChanCore* c);
std::size_t chan_size(const ChanCore* c) noexcept;
std::size_t chan_capacity(const ChanCore* c) noexcept;

// ---- select
// An event source other than a channel that select can wait on (netpoll's case_readable /
// case_writable). While a select is parked, an armed source holds a SelectHook and calls
// select_hook_fire(hook) exactly once when it becomes ready -- or fails: the case then fires and
// the caller's next operation reports the error. A source registers at most one hook at a time.
struct SelectHook;
struct SelectSource {
  // Non-blocking: would the case proceed now?
  bool (*ready_now)(void* obj);
  // Registers `hook`; false if the source is ready (or failed) already, with nothing registered.
  // Called from the select's park commit: it must not block or park.
  bool (*arm)(void* obj, SelectHook* hook);
  // Unregisters `hook` after an arm() that returned true. If the source has already taken the
  // hook to fire it, waits (select_hook_wait) until that select_hook_fire() returned: afterwards
  // the source never touches `hook` again.
  void (*disarm)(void* obj, SelectHook* hook);
};
// Claims the select for the hook's case (if no other case won first) and wakes it.
void select_hook_fire(SelectHook* hook) noexcept;
// Waits until select_hook_fire(hook), called (or about to be called) by whoever took the hook
// from the source, has returned.
void select_hook_wait(const SelectHook* hook) noexcept;

// What a case is, by kind; 24 bytes, as select() builds one per case on every call.
struct SelectCase {
  enum Kind : std::uint8_t { kRecv, kSend, kTimeout, kDefault, kSource };
  explicit SelectCase(Kind k) noexcept : kind(k) {}
  Kind kind;
  bool received = false;  // out, kRecv: a value was constructed in `slot`
  union {
    ChanCore* chan = nullptr;    // kRecv/kSend; nullptr (nil) never fires
    const SelectSource* source;  // kSource, with source_obj
  };
  union {
    void* slot = nullptr;      // kRecv: raw storage; kSend: the value to move from
    void* source_obj;          // kSource
    std::int64_t deadline_ns;  // kTimeout: absolute steady_clock time
  };
};
static_assert(sizeof(void*) != 8 || sizeof(SelectCase) == 24, "SelectCase grew");
// Runs Go's selectgo over `cases` and returns the index of the case that fired. A send case on a
// closed channel throws ChannelClosed (if it is the one chosen). n == 0 blocks forever.
std::size_t select_run(SelectCase* cases, std::size_t n);

// ---- timer channels (after(), Ticker): the channel owns its runtime timer, which sends
// steady_clock::now() with try_send semantics (a tick nobody took is dropped, as in Go).
// period_ns == 0: one shot. Requires a running runtime (std::logic_error otherwise).
ChanCore* chan_make_timer(std::int64_t first_ns, std::int64_t period_ns);
// Disarms the channel's timer for good; no tick is sent after it returns.
void chan_stop_timer(ChanCore* c) noexcept;
// weft::Timer (Go 1.23's time.Timer): stops the one-shot timer and discards a value it sent that
// nobody received; true if either prevented a delivery. Reset: the same, then re-arms it for
// `when_ns` (std::logic_error without a running runtime). Serialised per timer.
bool chan_timer_stop(ChanCore* c) noexcept;
bool chan_timer_reset(ChanCore* c, std::int64_t when_ns);

}  // namespace detail
}  // namespace weft
