#include "chat_server.hpp"

#include <absl/container/flat_hash_map.h>
#include <absl/time/time.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>
#include <weft/server.hpp>
#include <weft/weft.hpp>

#include "common/connection_cap.hpp"
#include "common/linger_close.hpp"
#include "common/read_timeouts.hpp"
#include "common/write_bounds.hpp"

namespace chat {

namespace {

using Clock = std::chrono::steady_clock;

// A client's socket, shared by its reader, its writer and the hub (which may end it). Closed
// when the last of them lets go, so nobody touches a closed socket.
struct Conn {
  explicit Conn(weft::net::TcpStream s) : stream(std::move(s)) {}
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    if (reset_on_close.load() && stream.is_open()) {
      // A dropped client's unsent backlog (up to the socket's send buffer) is discarded with a
      // reset instead of trickling out to a peer that does not read.
      const linger lg{1, 0};
      setsockopt(stream.fd(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
  }
  weft::net::TcpStream stream;
  std::atomic<bool> reset_on_close{false};
  // Bytes of the lines in the client's outgoing channel (line_cost each): the hub adds before it
  // queues one, the writer subtracts as it takes one.
  std::atomic<std::size_t> queued_bytes{0};
  // Set before kill()'s deadline: the reader, which moves its read deadline itself (its
  // timeouts), checks it after each move, so a kill is never undone by the reader.
  std::atomic<bool> killed{false};
  // Fails the reader's and the writer's blocked calls at once (safe from any fiber).
  void kill() {
    killed.store(true);
    stream.set_deadline(Clock::now());
  }
};

// A line on its way to clients. Immutable and shared: a broadcast queues one pointer per client,
// not a copy of the line each (10,000 clients joining in batches of kBatchMax nicks queued
// about 2.5 KB per client per batch, hundreds of MB at the peak, and the heap stayed fragmented
// by it after they left).
using Line = std::shared_ptr<const std::string>;

std::size_t line_cost(const std::string& line) { return line.size() + kLineOverhead; }

// Events for the hub.
struct Join {
  std::uint64_t id;
  std::shared_ptr<Conn> conn;
  weft::Chan<Line> out;
};
struct Leave {
  std::uint64_t id;
  std::string to_client;  // a last line for the leaver ("* bye")
  std::string reason;     // shown to the others
};
struct Said {
  std::uint64_t id;
  Command::Kind kind;
  std::string arg;  // sanitized
};
struct Shutdown {};
using Event = std::variant<Join, Leave, Said, Shutdown>;

class Hub {
 public:
  explicit Hub(std::size_t out_queue_bytes) : budget_(out_queue_bytes) {}

  // Joins and leaves are announced in batches: the nicks that joined (or left, for the same
  // reason) within kBatchWindow of the first unannounced one, at most kBatchMax, share one line,
  // "* a, b, c joined" or "* a, b left (line timeout)". A broadcast per join or leave is O(n^2)
  // lines for n of them: it held the hub for 7-8 s while 8,000 clients joined, with /who and
  // every message waiting behind it; and 2,000 slowloris clients timing out at once sent each
  // client 2,000 lines in a burst, more than its queue holds, so everyone was dropped as too
  // slow. A lone join or leave is announced kBatchWindow late, and every other event (a join
  // after leaves, a leave for another reason, any line) first flushes the batch, so the room
  // hears everything in the order it happened.
  void run(const weft::Chan<Event>& events) {
    for (;;) {
      std::optional<Event> e;
      if (batch_.empty()) {
        e = events.recv();
      } else {
        const auto left = batch_deadline_ - Clock::now();
        if (left <= Clock::duration::zero() ||
            weft::select(weft::case_recv(events, [&](std::optional<Event> v) { e = std::move(v); }),
                         weft::case_timeout(left)) == 1) {
          announce();
          drop_slow_clients();
          continue;
        }
      }
      if (!e) break;  // closed: nobody is left to tell
      if (!std::holds_alternative<Join>(*e) && !std::holds_alternative<Leave>(*e)) announce();
      std::visit([this](auto& ev) { handle(ev); }, *e);
      drop_slow_clients();
    }
  }

 private:
  struct Client {
    std::string nick;
    std::shared_ptr<Conn> conn;
    weft::Chan<Line> out;
    bool marked_slow = false;  // in slow_ already: a full queue is marked once, not per line
  };

  void handle(Join& j) {
    if (stopping_) {
      j.conn->kill();
      j.out.close();
      return;
    }
    std::string nick = "guest" + std::to_string(j.id);
    while (by_nick_.contains(nick)) nick += '_';  // someone renamed themselves guestN
    by_nick_[nick] = j.id;
    Client& c = clients_[j.id] = Client{nick, std::move(j.conn), std::move(j.out)};
    send(j.id, c, "* welcome, you are " + nick + "; /help lists the commands\n");
    batch(std::move(nick), " joined");
  }

  // Adds `nick` to the batch of `what` (" joined", " left (reason)"), announcing the batch
  // first if it is of something else, and after if it is full.
  void batch(std::string nick, std::string_view what) {
    if (!batch_.empty() && batch_what_ != what) announce();
    if (batch_.empty()) {
      batch_what_ = what;
      batch_deadline_ = Clock::now() + kBatchWindow;
    }
    batch_.push_back(std::move(nick));
    if (batch_.size() >= kBatchMax) announce();
  }

  // "* a joined" or "* a, b, c left (why)" for the batch not yet announced.
  void announce() {
    if (batch_.empty()) return;
    std::string line = "* ";
    for (std::size_t i = 0; i < batch_.size(); ++i) {
      if (i) line += ", ";
      line += batch_[i];
    }
    batch_.clear();
    if (batch_.capacity() > 4 * kBatchMax) std::vector<std::string>().swap(batch_);
    broadcast(line + batch_what_ + "\n");
  }

  void handle(Leave& l) {
    auto it = clients_.find(l.id);
    if (it == clients_.end()) return;  // already dropped
    if (!l.to_client.empty()) {
      enqueue(it->second, std::make_shared<const std::string>(std::move(l.to_client)));
    }
    std::string nick = it->second.nick;
    remove(it, /*kill=*/false);  // its writer flushes what is queued, then ends
    batch(std::move(nick), l.reason.empty() ? " left" : " left (" + l.reason + ")");
  }

  void handle(Said& s) {
    auto it = clients_.find(s.id);
    if (it == clients_.end()) return;
    Client& c = it->second;
    switch (s.kind) {
      case Command::Kind::kMessage:
        broadcast("<" + c.nick + "> " + s.arg + "\n");
        break;
      case Command::Kind::kMe:
        if (s.arg.empty()) {
          send(s.id, c, "! usage: /me ACTION\n");
        } else {
          broadcast("* " + c.nick + " " + s.arg + "\n");
        }
        break;
      case Command::Kind::kNick:
        rename(s.id, c, s.arg);
        break;
      case Command::Kind::kWho: {
        std::string line = "* online (" + std::to_string(clients_.size()) + "):";
        const char* sep = " ";
        for (const auto& [id, other] : clients_) {
          line += sep + other.nick;
          sep = ", ";
        }
        send(s.id, c, line + "\n");
        break;
      }
      case Command::Kind::kHelp:
        send(s.id, c,
             "* commands: /nick NAME, /me ACTION, /who, /quit, /help "
             "(start a message with // to send a line that starts with /)\n");
        break;
      case Command::Kind::kUnknown:
        send(s.id, c, "! unknown command /" + s.arg.substr(0, 64) + " (try /help)\n");
        break;
      case Command::Kind::kEmpty:
      case Command::Kind::kQuit:  // readers turn /quit into a Leave
        break;
    }
  }

  void handle(Shutdown&) {
    stopping_ = true;
    for (auto& [id, c] : clients_) {
      c.conn->kill();
      c.out.close();
    }
    clients_.clear();
    by_nick_.clear();
  }

  void rename(std::uint64_t id, Client& c, const std::string& nick) {
    if (!valid_nick(nick)) {
      send(id, c, "! a nick is 1-32 of A-Z a-z 0-9 _ -\n");
      return;
    }
    if (nick == c.nick) return;
    if (by_nick_.contains(nick)) {
      send(id, c, "! nick " + nick + " is taken\n");
      return;
    }
    const std::string old = c.nick;
    by_nick_.erase(old);
    by_nick_[nick] = id;
    c.nick = nick;
    broadcast("* " + old + " is now known as " + nick + "\n");
  }

  // Queues `line` for `c` within its byte budget; false if it does not fit (the client is too
  // slow) or the queue is closed. A line over the whole budget fits an empty queue.
  bool enqueue(Client& c, Line line) {
    const std::size_t cost = line_cost(*line);
    std::atomic<std::size_t>& queued = c.conn->queued_bytes;
    const std::size_t held = queued.load(std::memory_order_relaxed);  // only the writer lowers it
    if (held > 0 && held + cost > budget_) return false;
    queued.fetch_add(cost, std::memory_order_relaxed);
    if (c.out.try_send(std::move(line))) return true;
    queued.fetch_sub(cost, std::memory_order_relaxed);
    return false;
  }

  // Never blocks: a client whose queue is over its budget is marked to be dropped.
  void send(std::uint64_t id, Client& c, std::string line) {
    send(id, c, std::make_shared<const std::string>(std::move(line)));
  }
  void send(std::uint64_t id, Client& c, Line line) {
    if (!enqueue(c, std::move(line)) && !c.marked_slow) {
      c.marked_slow = true;
      slow_.push_back(id);
    }
  }

  void broadcast(std::string text) {
    const Line line = std::make_shared<const std::string>(std::move(text));
    for (auto& [id, c] : clients_) send(id, c, line);
  }

  void remove(std::map<std::uint64_t, Client>::iterator it, bool kill) {
    if (kill) {
      it->second.conn->reset_on_close.store(true);
      it->second.conn->kill();
    }
    it->second.out.close();
    by_nick_.erase(it->second.nick);
    clients_.erase(it);
    // After a crowd has gone, give the table's memory back (it never shrinks by itself).
    if (by_nick_.capacity() > 64 && by_nick_.size() * 8 < by_nick_.capacity()) {
      by_nick_.rehash(0);
    }
  }

  // Announced in a batch too (whose broadcast may mark more, dropped after it).
  void drop_slow_clients() {
    while (!slow_.empty()) {
      const std::uint64_t id = slow_.back();
      slow_.pop_back();
      auto it = clients_.find(id);
      if (it == clients_.end()) continue;
      std::string nick = it->second.nick;
      remove(it, /*kill=*/true);
      batch(std::move(nick), " left (too slow: dropped)");
    }
    if (slow_.capacity() > 1024) std::vector<std::uint64_t>().swap(slow_);
  }

  std::map<std::uint64_t, Client> clients_;  // by id: join order
  absl::flat_hash_map<std::string, std::uint64_t> by_nick_;
  const std::size_t budget_;         // ServerOptions::out_queue_bytes
  std::vector<std::uint64_t> slow_;  // clients to drop, each once (Client::marked_slow)
  static constexpr std::size_t kBatchMax = 256;
  static constexpr std::chrono::milliseconds kBatchWindow{20};
  std::vector<std::string> batch_;    // nicks that joined or left, not yet announced (announce())
  std::string batch_what_;            // what they did: " joined", " left (why)"
  Clock::time_point batch_deadline_;  // when batch_ is announced at the latest
  bool stopping_ = false;
};

void client_main(weft::net::TcpStream stream, std::uint64_t id, const weft::Chan<Event>& events,
                 const ServerOptions& opts) {
  auto conn = std::make_shared<Conn>(std::move(stream));
  // Bounded in bytes by the hub (Hub::enqueue); in lines only as many as the bytes allow, and
  // its ring grows with what it holds, so an idle client's costs no ring at all.
  weft::Chan<Line> out(std::max<std::size_t>(2, opts.out_queue_bytes / kLineOverhead));
  // Closed when the writer ends, so that a leaving reader can wait for it with a bound.
  weft::Chan<int> writer_done;
  weft::Task<void> writer =
      weft::spawn(weft::FiberOptions{.name = "chat-writer"}, [conn, out, writer_done, &opts] {
        struct Done {
          weft::Chan<int> c;
          ~Done() { c.close(); }
        } done{writer_done};
        // Every write bounded by the write timeout; the queue's bound (the hard limit) is the
        // hub's.
        examples::WriteBounds writes(opts.write_timeout, opts.out_queue_bytes,
                                     opts.out_queue_bytes);
        // A kill() from the hub or the reader ends the write even if `writes` just moved the
        // deadline.
        const auto alive = [&] { return !conn->killed.load(); };
        const auto taken = [&](const Line& l) {
          conn->queued_bytes.fetch_sub(line_cost(*l), std::memory_order_relaxed);
        };
        for (;;) {
          std::optional<Line> first = out.recv();
          if (!first) return;  // closed by the hub: everything queued has been written
          taken(*first);
          // Whatever else is queued goes out in the same write: one syscall per wake-up, not per
          // line, so a reading client keeps up with bursts. A lone line is written from the shared
          // copy; a batch is built for this write only, so an idle writer holds no buffer.
          std::optional<Line> next = out.try_recv();
          absl::Status written;
          if (!next) {
            written = writes.write_all(conn->stream, **first, alive);
          } else {
            std::string batch = **first;
            first.reset();
            do {
              taken(*next);
              batch += **next;
              next.reset();
            } while (batch.size() < 64 * 1024 && (next = out.try_recv()));
            written = writes.write_all(conn->stream, batch, alive);
          }
          if (!written.ok()) {
            conn->kill();  // the reader leaves too
            return;
          }
        }
      });
  events.send(Join{id, conn, out});

  LineFramer framer(opts.max_line);
  Leave leave{id, "", ""};
  bool hung_up = false;  // the peer closed or reset, or we were killed: nothing to linger for
  char buf[4096];
  std::string line;
  // Waiting: for the next line, within idle_timeout; in a request: a line has begun, and must end
  // within line_timeout of its first byte.
  examples::ReadTimeouts timeouts(opts.idle_timeout, opts.line_timeout);
  timeouts.wait_for_request();
  for (bool done = false; !done;) {
    timeouts.arm(conn->stream);
    if (conn->killed.load()) {  // after arm(): see Conn::killed
      hung_up = true;
      break;
    }
    absl::StatusOr<std::size_t> n = conn->stream.read(buf, sizeof buf);
    if (!n.ok() && n.status().code() == absl::StatusCode::kDeadlineExceeded &&
        !conn->killed.load()) {
      if (!timeouts.expired(conn->stream)) continue;  // an earlier deadline: read on
      const bool mid_line = timeouts.in_request();
      const std::string limit =
          absl::FormatDuration(absl::FromChrono(mid_line ? opts.line_timeout : opts.idle_timeout));
      leave.to_client = mid_line ? "! no end of line within " + limit +
                                       " of its start (lines end with a newline); closing\n"
                                 : "! nothing received for " + limit +
                                       "; closing (send a line, an empty one too, to stay)\n";
      leave.reason = mid_line ? "line timeout" : "idle";
      break;
    }
    if (!n.ok() || *n == 0) {
      hung_up = true;
      break;
    }
    framer.feed(std::string_view(buf, *n));
    for (;;) {
      const LineFramer::Next r = framer.next(&line);
      if (r == LineFramer::Next::kNeedMore) break;
      if (r == LineFramer::Next::kTooLong) {
        leave.to_client =
            "! line too long (the limit is " + std::to_string(opts.max_line) + " bytes); closing\n";
        leave.reason = "line too long";
        done = true;
        break;
      }
      timeouts.request_done();
      const std::string clean = sanitize(line);
      const Command cmd = parse_line(clean);
      if (cmd.kind == Command::Kind::kEmpty) continue;
      if (cmd.kind == Command::Kind::kQuit) {
        leave.to_client = "* bye\n";
        done = true;
        break;
      }
      events.send(Said{id, cmd.kind, std::string(cmd.arg)});
    }
    // A partial line left: it began with this read if a line ended in it, or none was under way
    // (request_begun() keeps an earlier start). Otherwise the idle wait starts now.
    if (framer.buffered() > 0) {
      timeouts.request_begun();
    } else {
      timeouts.wait_for_request();
    }
  }
  events.send(std::move(leave));
  // The hub closes `out` on the Leave (or has dropped us); give the writer a bounded time to
  // flush the last lines, then end its write (the writer moves its own write deadline, so the
  // bound is kept here, not as a deadline) and wait for it.
  bool flushed = false;
  weft::select(weft::case_recv(writer_done, [&] { flushed = true; }),
               weft::case_timeout(opts.flush_timeout));
  if (!flushed) conn->kill();
  writer.join();
  if (!hung_up) examples::linger_close(conn->stream);
}

}  // namespace

void run_chat_server(weft::net::TcpListener listener, weft::Chan<int> stop,
                     const ServerOptions& opts) {
  weft::Chan<Event> events(1024);
  // Every kind of fiber has a name, so a stack-size table (WEFT_STACK_SIZES, written by
  // `weft-stackprof sizes` from a profiled run) can size each kind's stacks.
  weft::Task<void> hub =
      weft::spawn(weft::FiberOptions{.name = "chat-hub"},
                  [events, budget = opts.out_queue_bytes] { Hub(budget).run(events); });
  weft::net::Server server(std::move(listener));
  examples::ConnectionCap cap("chat_server", "--max_conns", opts.max_conns);
  const std::string full =
      "! the server is full (" + std::to_string(cap.limit()) + " clients); try again later\n";
  std::atomic<std::uint64_t> next_id{0};
  weft::Task<absl::Status> serving = weft::spawn(weft::FiberOptions{.name = "chat-accept"}, [&] {
    return server.serve(
        [&](weft::net::TcpStream& s, const weft::Context&) {
          std::optional<examples::ConnectionCap::Slot> slot = cap.try_admit();
          if (!slot) return examples::refuse(s, full);
          // The stream stays bound to the server's context when it moves into the shared Conn.
          client_main(std::move(s), next_id.fetch_add(1, std::memory_order_relaxed) + 1, events,
                      opts);
        },
        weft::FiberOptions{.name = "chat-reader"});
  });

  stop.recv();  // a value or a close: either means stop
  // The hub ends every client, and any that joins before accepting stops; idle clients never
  // finish on their own, so this is what lets drain() return within its grace.
  events.send(Shutdown{});
  if (absl::Status d = server.drain(opts.drain_grace); !d.ok()) {
    std::fprintf(stderr, "chat_server: %s\n", std::string(d.ToString()).c_str());
  }
  if (absl::Status s = serving.join(); !s.ok()) {
    std::fprintf(stderr, "chat_server: accepting failed: %s\n", std::string(s.ToString()).c_str());
  }
  events.close();  // no client is left to send
  hub.join();
}

}  // namespace chat
