#include "resp_server.hpp"

#include <absl/time/time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <weft/server.hpp>
#include <weft/weft.hpp>

#include "common/connection_cap.hpp"
#include "common/linger_close.hpp"
#include "common/read_timeouts.hpp"
#include "common/write_bounds.hpp"
#include "resp_commands.hpp"

namespace resp {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kInitialBuffer = 16 * 1024;  // as Redis's PROTO_IOBUF_LEN
constexpr std::size_t kMaxReadChunk = 4 << 20;     // at most this much room per read
constexpr int kCommandsPerSlice = 1024;            // then yield the worker

// The connection's input: bytes [begin_, end_) of data_ are unparsed.
class InputBuffer {
 public:
  std::string_view view() const { return {data_.get() + begin_, end_ - begin_}; }
  void drop(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // Room for at least `want` more bytes at the end: compacts, then grows (doubling).
  std::span<char> space(std::size_t want) {
    if (cap_ - end_ >= want) return {data_.get() + end_, cap_ - end_};
    if (begin_ > 0) {
      std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (cap_ - end_ < want) {
      const std::size_t cap = std::max({cap_ * 2, end_ + want, kInitialBuffer});
      auto fresh = std::make_unique_for_overwrite<char[]>(cap);
      if (end_ > 0) std::memcpy(fresh.get(), data_.get(), end_);
      data_ = std::move(fresh);
      cap_ = cap;
    }
    return {data_.get() + end_, cap_ - end_};
  }
  void produced(std::size_t n) { end_ += n; }
  // Gives back a large buffer once it is empty (after a big command).
  void maybe_shrink() {
    if (begin_ == end_ && cap_ > 16 * kInitialBuffer) {
      data_.reset();
      cap_ = begin_ = end_ = 0;
    }
  }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t cap_ = 0, begin_ = 0, end_ = 0;
};

void serve_conn(weft::net::TcpStream& s, Store& store, const ServerOptions& opts,
                std::uint64_t id) {
  Parser parser(opts.limits);
  Session session;
  session.id = id;
  InputBuffer in;
  std::string out;
  // Waiting: for a command's first byte, within opts.timeout; in a request: a command has begun,
  // and must be complete within opts.command_timeout of its first byte.
  examples::ReadTimeouts timeouts(opts.timeout, opts.command_timeout);
  timeouts.wait_for_request();
  // Every write goes through `writes` (the write timeout); its soft limit is when replies are
  // written before more commands are parsed, its hard limit what one reply may take.
  examples::WriteBounds writes(opts.write_timeout, opts.output_soft_limit, opts.output_hard_limit);
  for (;;) {
    const std::size_t want =
        std::clamp<std::size_t>(parser.bytes_wanted(), kInitialBuffer / 2, kMaxReadChunk);
    const std::span<char> room = in.space(want);
    timeouts.arm(s);
    absl::StatusOr<std::size_t> n = s.read(room.data(), room.size());
    if (!n.ok() && n.status().code() == absl::StatusCode::kDeadlineExceeded) {
      if (!timeouts.expired(s)) continue;  // an earlier deadline: read on
      if (timeouts.in_request()) {
        append_error(&out, "ERR command not complete within " +
                               absl::FormatDuration(absl::FromChrono(opts.command_timeout)) +
                               " of its first byte (the server's command_timeout); closing");
        if (writes.write_all(s, out).ok()) examples::linger_close(s);
      }
      return;  // idle past opts.timeout: closed quietly, as Redis does
    }
    if (!n.ok() || *n == 0) return;  // peer gone, reset, or stopped: nothing to report
    in.produced(*n);
    bool protocol_error = false;
    int slice = 0;
    for (;;) {
      const Parser::Result r = parser.parse(in.view());
      if (r == Parser::Result::kCommand) {
        timeouts.request_done();
        const std::size_t before = out.size();
        execute(store, parser.args(), session, &out);
        if (writes.over_hard(out.size())) {
          const std::size_t reply = out.size() - before;
          out.resize(before);  // the replies before it still go out
          append_error(&out, "ERR reply of " + std::to_string(reply) +
                                 " bytes is over the output buffer limit (" +
                                 std::to_string(writes.hard()) +
                                 " bytes with what is pending, the server's "
                                 "output_hard_limit); closing");
          if (writes.write_all(s, out).ok()) examples::linger_close(s);
          return;
        }
      } else if (r == Parser::Result::kError) {
        append_error(&out, "ERR Protocol error: " + parser.error());
        protocol_error = true;
      }
      in.drop(parser.consumed());
      if (r != Parser::Result::kCommand || session.close_after) break;
      // Past the soft limit, nothing more is parsed (or read) until the replies are written.
      if (writes.flush_now(out.size()) || ++slice == kCommandsPerSlice) {
        if (!out.empty() && !writes.write_all(s, out).ok()) return;
        out.clear();
        if (slice == kCommandsPerSlice) {
          slice = 0;
          weft::this_fiber::yield();  // a long pipeline must not hold the worker
        }
      }
    }
    if (!out.empty()) {
      if (!writes.write_all(s, out).ok()) return;
      out.clear();
      // A large reply's buffer is not kept for the small ones that usually follow.
      if (out.capacity() > 4 * opts.output_soft_limit) std::string().swap(out);
    }
    if (protocol_error || session.close_after) {
      examples::linger_close(s);
      return;
    }
    // A partial command left: it began with this read if a command ended in it, or none was
    // under way (request_begun() keeps an earlier start). Otherwise the idle wait starts now.
    if (!in.view().empty()) {
      timeouts.request_begun();
    } else {
      timeouts.wait_for_request();
    }
    in.maybe_shrink();
  }
}

}  // namespace

void serve(weft::net::TcpListener listener, weft::Chan<int> stop, Store& store,
           const ServerOptions& opts) {
  weft::net::Server server(std::move(listener));
  examples::ConnectionCap cap("resp_server", "--maxclients", opts.maxclients);
  std::atomic<std::uint64_t> next_id{0};
  weft::Task<absl::Status> serving = weft::spawn([&] {
    return server.serve([&](weft::net::TcpStream& s, const weft::Context&) {
      std::optional<examples::ConnectionCap::Slot> slot = cap.try_admit();
      if (!slot) return examples::refuse(s, "-ERR max number of clients reached\r\n");
      // The stream is bound to the server's context: a drain fails its blocked read or write.
      serve_conn(s, store, opts, next_id.fetch_add(1, std::memory_order_relaxed) + 1);
    });
  });
  weft::Chan<int> quit;  // closed at stop, for the sweeper
  weft::Task<void> sweeper = weft::spawn([&] {
    weft::Ticker ticker(opts.sweep_every);
    bool done = false;
    while (!done) {
      weft::select(weft::case_recv(ticker.chan(), [&] { store.sweep(opts.sweep_budget); }),
                   weft::case_recv(quit, [&] { done = true; }));
    }
  });

  stop.recv();  // a value or a close: either means stop
  quit.close();
  // Clients keep idle connections open, so with no grace every connection ends at once (a
  // blocked read or write fails); with one, commands in flight get that long to finish.
  if (absl::Status d = server.drain(opts.drain_grace); !d.ok() && opts.drain_grace.count() > 0) {
    std::fprintf(stderr, "resp_server: %s\n", std::string(d.ToString()).c_str());
  }
  if (absl::Status s = serving.join(); !s.ok()) {
    std::fprintf(stderr, "resp_server: accepting failed: %s\n", std::string(s.ToString()).c_str());
  }
  sweeper.join();
}

}  // namespace resp
