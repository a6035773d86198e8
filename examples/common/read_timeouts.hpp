// ReadTimeouts: the servers' defence against idle and slow clients, kept as the one read deadline
// of the connection's stream (Socket::set_read_deadline, TlsStream's: a timer inside the socket's
// poll descriptor, so no fiber, no allocation and no memory per connection beyond this object).
// Between reads a connection is in one of two states:
//
//   waiting     for the first byte of the next request (HTTP request, chat line, RESP command):
//               it must come within `idle` of when the wait began (wait_for_request());
//   in request  a request has begun and is not complete: it must be complete within `request` of
//               its start (request_begun(); allow() changes the allowance, e.g. for a body).
//
// The server reports what each read brought and calls arm() before the next read; a read that
// fails with kDeadlineExceeded goes to expired(), which says whether a bound really passed.
//
// arm() is lazy so that a busy connection costs no timer operation per request: it moves the
// stream's deadline only when the new one is earlier than the one set (or none is set). A later
// one (the common case: a request complete in one read, then the next idle wait) leaves the
// earlier deadline in place; when that fires, expired() finds the real bound not yet passed,
// sets it, and the server reads again. So the stream's deadline is never later than the bound,
// and a connection that keeps working is woken spuriously about once per timeout, not re-armed
// per request. A zero duration means no bound.
//
//   examples::ReadTimeouts t(idle, request);
//   t.wait_for_request();
//   for (;;) {
//     t.arm(stream);
//     auto n = stream.read(buf, sizeof buf);
//     if (!n.ok() && n.status().code() == absl::StatusCode::kDeadlineExceeded &&
//         !t.expired(stream)) continue;            // the bound moved later: read on
//     if (!n.ok() || *n == 0) ...                   // timed out (t.in_request() says which), or
//     gone
//     ... t.request_done() per complete request, t.request_begun() when a partial one is left
//   }
#pragma once

#include <chrono>
#include <weft/net.hpp>

namespace examples {

class ReadTimeouts {
 public:
  using Clock = std::chrono::steady_clock;

  ReadTimeouts(Clock::duration idle, Clock::duration request) : idle_(idle), request_(request) {}

  // Waiting for the next request from now (the connection's start, or the end of a response).
  void wait_for_request() {
    in_request_ = false;
    bound_ = after(Clock::now(), idle_);
  }
  // A request has begun (its first byte came with the last read, or, for http_server's first
  // request, the connection just started): it must be complete within `request` from now. No-op
  // while a request is already under way: its bound stands.
  void request_begun() {
    if (in_request_) return;
    in_request_ = true;
    started_ = Clock::now();
    bound_ = after(started_, request_);
  }
  // The request under way must now be complete within `total` of its start instead.
  void allow(Clock::duration total) {
    if (in_request_) bound_ = after(started_, total);
  }
  // The request is complete; the idle wait starts at wait_for_request(), once it is answered.
  void request_done() { in_request_ = false; }
  bool in_request() const { return in_request_; }

  // Before a read: makes the stream's read deadline no later than the bound.
  template <class Stream>
  void arm(Stream& s) {
    if (bound_ == kNone) return;  // an earlier deadline still set fires, and expired() clears it
    if (armed_ == kNone || bound_ < armed_) set(s, bound_);
  }
  // After a read failed with kDeadlineExceeded: true if the bound has passed (the connection
  // timed out); false if only an earlier deadline did, in which case the stream now carries the
  // bound and the read should be made again.
  template <class Stream>
  bool expired(Stream& s) {
    if (bound_ != kNone && Clock::now() >= bound_) return true;
    set(s, bound_);
    return false;
  }

 private:
  static constexpr Clock::time_point kNone{};
  static Clock::time_point after(Clock::time_point t, Clock::duration d) {
    return d > Clock::duration::zero() ? t + d : kNone;
  }
  template <class Stream>
  void set(Stream& s, Clock::time_point t) {
    s.set_read_deadline(t);  // TimePoint{} clears it
    armed_ = t;
  }

  Clock::duration idle_, request_;
  Clock::time_point started_{}, bound_{}, armed_{};
  bool in_request_ = false;
};

}  // namespace examples
