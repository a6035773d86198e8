// WriteBounds: the servers' defence against clients that do not read what they are sent (the
// write side of read_timeouts.hpp). Two bounds, one object per connection:
//
//   write timeout  a connection whose peer accepts no bytes for `timeout` is closed (nginx's
//                  send_timeout, Go's WriteTimeout). Every write of the connection goes through
//                  write_all() here, which writes in chunks of at most kChunk bytes and keeps the
//                  stream's write deadline (TcpStream's, TlsStream's) at least `timeout` past the
//                  start of the chunk under way and at most 1.5 x `timeout` past it. So a chunk
//                  the peer does not take within `timeout` fails the write with kDeadlineExceeded
//                  (at the latest 1.5 x `timeout` after it began) and the server closes the
//                  connection; a peer that keeps taking bytes is never cut off, however large the
//                  reply, as long as it takes each kChunk bytes within `timeout` (a floor of
//                  kChunk / timeout, 2 KiB/s at 30 s).
//   output budget  `soft`: the bytes of replies made but not yet written after which the server
//                  stops reading and parsing, writes them (bounded by the write timeout), and
//                  only then goes on (flush_now()); `hard`: past it (over_hard()), the connection
//                  is closed without them, as Redis's client-output-buffer-limit does. One reply
//                  larger than `soft` is still written whole; `hard` bounds what one connection
//                  can pin (a huge reply; a queue that others fill, as chat's broadcasts do).
//
// A write that times out also sets SO_LINGER to zero on the stream, so the close that follows
// discards the unsent backlog with a reset: otherwise the kernel keeps it (megabytes of send
// buffer on loopback), with the FIN queued behind it, for a peer that will not read it, and that
// peer never learns it was closed.
//
// Why chunks and not one deadline per write: write_all reports a passed deadline, not how much
// it wrote, so a deadline that fires early cannot be retried; a deadline per chunk keeps the
// bound about progress (the peer took the last chunk) rather than about the whole reply.
//
// Why lazy: setting a stream deadline is a timer operation (a lock and a timer-heap update). The
// deadline is moved only when the one set is less than `timeout` away (or none is set, or it has
// passed), and then to 1.5 x `timeout` from now: a connection that writes all the time moves it
// about once per timeout / 2, a small reply to a busy connection costs a clock read and a
// compare. A deadline left set while the connection reads or idles fires once with no writer
// waiting (it only marks the write side expired) and the next write re-arms first. A zero
// timeout means no bound: writes go straight to the stream's write_all.
//
// Nothing leaves a connection unbounded: a connection's fiber is reading (bounded by its
// ReadTimeouts: header, request, idle), writing (bounded here; the budget stops reading only by
// making the fiber write), or running. A server whose replies are queued by other fibers (chat)
// bounds the queue with `hard` and its writer fiber with the write timeout. Other writes on the
// stream (an error reply, linger_close's TLS close_notify) must go through write_all() or follow
// arm(), so that they are bounded too; nothing else may set the stream's write deadline while a
// WriteBounds is in use, except to end the connection (the `go_on` check of write_all()).
//
//   examples::WriteBounds wb(write_timeout, soft, hard);
//   ... replies appended to `out` ...
//   if (wb.over_hard(out.size())) -> close (an error reply through wb.write_all first, if any)
//   if (wb.flush_now(out.size())) -> if (!wb.write_all(s, out).ok()) return; out.clear();
//
// Not thread-safe: one per connection, used by the fiber that writes.
#pragma once

#include <absl/status/status.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string_view>
#include <weft/net.hpp>

namespace examples {

class WriteBounds {
 public:
  using Clock = std::chrono::steady_clock;
  // The largest piece handed to the stream's write_all at once: the peer must take this many
  // bytes within the timeout (TLS records are 16 KiB, so a TLS chunk is four).
  static constexpr std::size_t kChunk = 64 * 1024;
  // Defaults for the servers' flags.
  static constexpr std::chrono::seconds kDefaultTimeout{30};
  static constexpr std::size_t kDefaultSoft = 16 * 1024;
  static constexpr std::size_t kDefaultHard = 1024 * 1024;

  // `timeout` zero: writes are not bounded; `hard` zero: no hard limit.
  WriteBounds(Clock::duration timeout, std::size_t soft, std::size_t hard)
      : timeout_(timeout), soft_(soft), hard_(hard) {}

  Clock::duration timeout() const { return timeout_; }
  std::size_t soft() const { return soft_; }
  std::size_t hard() const { return hard_; }

  // With `pending` bytes of replies not yet written: true once they reach the soft budget (stop
  // reading and parsing, write them, then go on).
  bool flush_now(std::size_t pending) const { return pending >= soft_; }
  // True once `pending` is past the hard limit: close the connection without writing them.
  bool over_hard(std::size_t pending) const { return hard_ != 0 && pending > hard_; }

  // Writes all of `data` in chunks of at most kChunk bytes, each bounded by the write timeout (see
  // above). Fails as the stream's write_all does; kDeadlineExceeded means the peer took nothing
  // for the timeout: close the connection. `go_on`, checked after each move of the deadline, ends
  // the write with kCancelled when false: for a stream that another fiber may end by setting its
  // deadline (chat's kill()), so that a move here never undoes that.
  template <class Stream>
  absl::Status write_all(Stream& s, std::string_view data) {
    return write_all(s, data, [] { return true; });
  }
  template <class Stream, class GoOn>
  absl::Status write_all(Stream& s, std::string_view data, GoOn&& go_on) {
    if (timeout_ <= Clock::duration::zero()) return s.write_all(data);
    do {
      const std::string_view chunk = data.substr(0, kChunk);
      if (arm(s) && !go_on()) {
        return absl::CancelledError("write ended: the connection is being closed");
      }
      if (absl::Status st = s.write_all(chunk); !st.ok()) {
        if (st.code() == absl::StatusCode::kDeadlineExceeded && go_on()) {
          const linger reset{1, 0};  // timed out: the close resets (see above)
          setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        }
        return st;
      }
      data.remove_prefix(chunk.size());
    } while (!data.empty());
    return absl::OkStatus();
  }

  // Makes the stream's write deadline at least `timeout` and at most 1.5 x `timeout` away, moving
  // it only if needed; true if it moved. For a write that does not go through write_all() (a TLS
  // close_notify in linger_close). No-op without a timeout.
  template <class Stream>
  bool arm(Stream& s) {
    if (timeout_ <= Clock::duration::zero()) return false;
    const Clock::time_point now = Clock::now();
    if (armed_ != Clock::time_point{} && armed_ >= now + timeout_) return false;
    armed_ = now + timeout_ + timeout_ / 2;
    s.set_write_deadline(armed_);
    return true;
  }

 private:
  Clock::duration timeout_;
  std::size_t soft_, hard_;
  Clock::time_point armed_{};  // the write deadline set on the stream; {}: none yet
};

}  // namespace examples
