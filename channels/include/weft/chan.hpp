// Chan<T>: Go's channels for fibers and plain threads. A Chan is a handle: copies share one
// channel (reference-counted), like Go's chan values; nullptr is the nil channel.
//
// All scheduling logic lives once in the type-erased core (weft/detail/chan_core.hpp); this
// header only adapts T. Values are moved, never copied by the channel: send(T) takes its
// argument by value (move it in), recv() moves the value out into the optional.
//
// SendChan<T> / RecvChan<T> are Go's `chan<- T` / `<-chan T`: handles on the same channel that
// expose one direction only (the sending side may also close, as in Go). A Chan<T> converts to
// either implicitly, so a function that takes `weft::SendChan<Job>` documents, and the compiler
// enforces, that it only sends. They work in select (case_send / case_recv) like a Chan.
#pragma once

#include <concepts>
#include <cstddef>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/detail/chan_core.hpp"

namespace weft {

template <class T>
class Chan;
template <class T>
class SendChan;
template <class T>
class RecvChan;

namespace detail {
template <class T>
ChanCore* core_of(const Chan<T>& ch) noexcept;
template <class T>
ChanCore* core_of(const SendChan<T>& ch) noexcept;
template <class T>
ChanCore* core_of(const RecvChan<T>& ch) noexcept;
// Wraps a core that already carries the reference the new handle owns.
template <class T>
Chan<T> chan_adopt(ChanCore* core) noexcept;

// Raw storage for one T that the core may construct into.
template <class T>
struct RecvSlot {
  alignas(T) unsigned char bytes[sizeof(T)];
  void* get() noexcept { return bytes; }
  T& value() noexcept { return *std::launder(reinterpret_cast<T*>(bytes)); }
  std::optional<T> take() noexcept(std::is_nothrow_move_constructible_v<T>) {
    std::optional<T> out(std::move(value()));
    value().~T();
    return out;
  }
};
}  // namespace detail

template <class T>
class Chan {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_destructible_v<T>,
                "weft::Chan<T>: T must be nothrow move-constructible and nothrow destructible "
                "(values are moved while the channel's lock is held)");
  static_assert(!std::is_reference_v<T> && !std::is_const_v<T> && !std::is_array_v<T>,
                "weft::Chan<T>: T must be a non-const object type");

 public:
  using value_type = T;

  // Unbuffered: a send parks until a receiver takes the value.
  Chan() : core_(detail::chan_make(0, &detail::kElemOps<T>)) {}
  // Buffered with `capacity` slots; 0 means unbuffered. Negative throws std::invalid_argument.
  explicit Chan(std::integral auto capacity) : core_(make(capacity)) {}
  // The nil channel: operations on it block forever, select cases on it never fire.
  Chan(std::nullptr_t) noexcept {}

  Chan(const Chan& o) noexcept : core_(o.core_) { detail::chan_retain(core_); }
  Chan(Chan&& o) noexcept : core_(std::exchange(o.core_, nullptr)) {}
  Chan& operator=(const Chan& o) noexcept {
    detail::chan_retain(o.core_);
    detail::chan_release(core_);
    core_ = o.core_;
    return *this;
  }
  Chan& operator=(Chan&& o) noexcept {
    if (this != &o) {
      detail::chan_release(core_);
      core_ = std::exchange(o.core_, nullptr);
    }
    return *this;
  }
  Chan& operator=(std::nullptr_t) noexcept {
    detail::chan_release(std::exchange(core_, nullptr));
    return *this;
  }
  ~Chan() { detail::chan_release(core_); }

  // Parks until the value is taken (unbuffered) or buffered. Throws ChannelClosed if the channel
  // is closed, or is closed while this send waits (the value is then dropped, as in Go).
  void send(T v) const {
    if (detail::chan_send(core_, &v, true) == detail::ChanResult::kClosed) {
      throw ChannelClosed("weft::Chan::send: send on a closed channel");
    }
  }
  // Parks until a value arrives; std::nullopt once the channel is closed and drained.
  std::optional<T> recv() const {
    detail::RecvSlot<T> slot;
    if (detail::chan_recv(core_, slot.get(), true) != detail::ChanResult::kOk) return std::nullopt;
    return slot.take();
  }
  // Non-blocking send: false, with v untouched, if it would block. Throws ChannelClosed if closed.
  bool try_send(T&& v) const {
    switch (detail::chan_send(core_, &v, false)) {
      case detail::ChanResult::kOk:
        return true;
      case detail::ChanResult::kWouldBlock:
        return false;
      case detail::ChanResult::kClosed:
        break;
    }
    throw ChannelClosed("weft::Chan::try_send: send on a closed channel");
  }
  bool try_send(const T& v) const requires std::is_copy_constructible_v<T> {
    T copy(v);
    return try_send(std::move(copy));
  }
  // Non-blocking receive: std::nullopt if it would block, or if closed and drained.
  std::optional<T> try_recv() const {
    detail::RecvSlot<T> slot;
    if (detail::chan_recv(core_, slot.get(), false) != detail::ChanResult::kOk) {
      return std::nullopt;
    }
    return slot.take();
  }
  // Parked receivers get std::nullopt, parked senders throw ChannelClosed. Closing twice throws
  // ChannelClosed; closing nil throws std::logic_error.
  void close() const { detail::chan_close(core_); }

  std::size_t size() const noexcept { return detail::chan_size(core_); }          // len(ch)
  std::size_t capacity() const noexcept { return detail::chan_capacity(core_); }  // cap(ch)
  explicit operator bool() const noexcept { return core_ != nullptr; }
  friend bool operator==(const Chan& a, const Chan& b) noexcept { return a.core_ == b.core_; }
  friend bool operator==(const Chan& a, std::nullptr_t) noexcept { return a.core_ == nullptr; }

  // `for (T v : ch)` receives until the channel is closed and drained.
  class iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(const Chan* ch) : ch_(ch), cur_(ch->recv()) {}
    T& operator*() noexcept { return *cur_; }
    T* operator->() noexcept { return &*cur_; }
    iterator& operator++() {
      cur_ = ch_->recv();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
      return !it.cur_.has_value();
    }

   private:
    const Chan* ch_ = nullptr;
    std::optional<T> cur_;
  };
  iterator begin() const { return iterator(this); }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  template <class U>
  friend detail::ChanCore* detail::core_of(const Chan<U>& ch) noexcept;
  template <class U>
  friend Chan<U> detail::chan_adopt(detail::ChanCore* core) noexcept;

  static detail::ChanCore* make(std::integral auto capacity) {
    if constexpr (std::is_signed_v<decltype(capacity)>) {
      if (capacity < 0) {
        throw std::invalid_argument("weft::Chan: negative capacity " + std::to_string(capacity));
      }
    }
    return detail::chan_make(static_cast<std::size_t>(capacity), &detail::kElemOps<T>);
  }

  detail::ChanCore* core_ = nullptr;
};

// Go's `chan<- T`: send, try_send and close only. Implicit from Chan<T>, like Go's conversion;
// a default-constructed or nullptr SendChan is the nil channel.
template <class T>
class SendChan {
 public:
  using value_type = T;

  SendChan(std::nullptr_t = nullptr) noexcept : ch_(nullptr) {}
  SendChan(Chan<T> ch) noexcept : ch_(std::move(ch)) {}  // NOLINT: implicit on purpose

  void send(T v) const { ch_.send(std::move(v)); }
  bool try_send(T&& v) const { return ch_.try_send(std::move(v)); }
  bool try_send(const T& v) const requires std::is_copy_constructible_v<T> {
    return ch_.try_send(v);
  }
  void close() const { ch_.close(); }
  std::size_t size() const noexcept { return ch_.size(); }
  std::size_t capacity() const noexcept { return ch_.capacity(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ch_); }
  friend bool operator==(const SendChan& a, const SendChan& b) noexcept { return a.ch_ == b.ch_; }
  friend bool operator==(const SendChan& a, std::nullptr_t) noexcept { return a.ch_ == nullptr; }

 private:
  template <class U>
  friend detail::ChanCore* detail::core_of(const SendChan<U>& ch) noexcept;
  Chan<T> ch_;
};

// Go's `<-chan T`: recv, try_recv and range-for only (no close: in Go only the sending side
// closes). Implicit from Chan<T>; default-constructed or nullptr is the nil channel.
template <class T>
class RecvChan {
 public:
  using value_type = T;

  RecvChan(std::nullptr_t = nullptr) noexcept : ch_(nullptr) {}
  RecvChan(Chan<T> ch) noexcept : ch_(std::move(ch)) {}  // NOLINT: implicit on purpose

  std::optional<T> recv() const { return ch_.recv(); }
  std::optional<T> try_recv() const { return ch_.try_recv(); }
  std::size_t size() const noexcept { return ch_.size(); }
  std::size_t capacity() const noexcept { return ch_.capacity(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ch_); }
  friend bool operator==(const RecvChan& a, const RecvChan& b) noexcept { return a.ch_ == b.ch_; }
  friend bool operator==(const RecvChan& a, std::nullptr_t) noexcept { return a.ch_ == nullptr; }

  using iterator = typename Chan<T>::iterator;
  iterator begin() const { return ch_.begin(); }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  template <class U>
  friend detail::ChanCore* detail::core_of(const RecvChan<U>& ch) noexcept;
  Chan<T> ch_;
};

namespace detail {
template <class T>
ChanCore* core_of(const Chan<T>& ch) noexcept {
  return ch.core_;
}
template <class T>
ChanCore* core_of(const SendChan<T>& ch) noexcept {
  return core_of(ch.ch_);
}
template <class T>
ChanCore* core_of(const RecvChan<T>& ch) noexcept {
  return core_of(ch.ch_);
}
template <class T>
Chan<T> chan_adopt(ChanCore* core) noexcept {
  Chan<T> ch(nullptr);
  ch.core_ = core;
  return ch;
}
}  // namespace detail

}  // namespace weft
