#include "chat_server.hpp"

#include <absl/container/flat_hash_map.h>
#include <sys/socket.h>

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

#include "common/linger_close.hpp"

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
  // Fails the reader's and the writer's blocked calls at once (safe from any fiber).
  void kill() { stream.set_deadline(Clock::now()); }
};

// Events for the hub.
struct Join {
  std::uint64_t id;
  std::shared_ptr<Conn> conn;
  weft::Chan<std::string> out;
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
  // Joins are announced in batches: the nicks that joined within kJoinWindow of the first
  // unannounced one (at most kJoinBatch) share one line, "* a, b, c joined". A broadcast per
  // join is O(n^2) lines for n joins: it held the hub for 7-8 s while 8,000 clients joined, with
  // /who and every message waiting behind it. A lone join is announced kJoinWindow late, and
  // every other event first flushes the batch, so no line about a client precedes the news that
  // it joined.
  void run(const weft::Chan<Event>& events) {
    for (;;) {
      std::optional<Event> e;
      if (joined_.empty()) {
        e = events.recv();
      } else {
        const auto left = join_deadline_ - Clock::now();
        if (left <= Clock::duration::zero() ||
            weft::select(weft::case_recv(events, [&](std::optional<Event> v) { e = std::move(v); }),
                         weft::case_timeout(left)) == 1) {
          announce_joins();
          drop_slow_clients();
          continue;
        }
      }
      if (!e) break;  // closed: nobody is left to tell
      if (!std::holds_alternative<Join>(*e)) announce_joins();
      std::visit([this](auto& ev) { handle(ev); }, *e);
      if (joined_.size() >= kJoinBatch) announce_joins();
      drop_slow_clients();
    }
  }

 private:
  struct Client {
    std::string nick;
    std::shared_ptr<Conn> conn;
    weft::Chan<std::string> out;
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
    if (joined_.empty()) join_deadline_ = Clock::now() + kJoinWindow;
    joined_.push_back(std::move(nick));
  }

  // "* a joined" or "* a, b, c joined" for the joins not yet announced.
  void announce_joins() {
    if (joined_.empty()) return;
    std::string line = "* ";
    for (std::size_t i = 0; i < joined_.size(); ++i) {
      if (i) line += ", ";
      line += joined_[i];
    }
    joined_.clear();
    broadcast(line + " joined\n");
  }

  void handle(Leave& l) {
    auto it = clients_.find(l.id);
    if (it == clients_.end()) return;  // already dropped
    if (!l.to_client.empty()) it->second.out.try_send(std::move(l.to_client));
    const std::string nick = it->second.nick;
    remove(it, /*kill=*/false);  // its writer flushes what is queued, then ends
    broadcast("* " + nick + " left" + (l.reason.empty() ? "" : " (" + l.reason + ")") + "\n");
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

  // Never blocks: a client whose queue is full is marked to be dropped.
  void send(std::uint64_t id, Client& c, std::string line) {
    if (!c.out.try_send(std::move(line)) && !c.marked_slow) {
      c.marked_slow = true;
      slow_.push_back(id);
    }
  }

  void broadcast(const std::string& line) {
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
    if (by_nick_.capacity() > 1024 && by_nick_.size() * 8 < by_nick_.capacity()) {
      by_nick_.rehash(0);
    }
  }

  void drop_slow_clients() {
    if (!slow_.empty()) announce_joins();  // "joined" before any "left" about the same client
    while (!slow_.empty()) {
      const std::uint64_t id = slow_.back();
      slow_.pop_back();
      auto it = clients_.find(id);
      if (it == clients_.end()) continue;
      const std::string nick = it->second.nick;
      remove(it, /*kill=*/true);
      broadcast("* " + nick + " left (too slow: dropped)\n");  // may mark more
    }
    if (slow_.capacity() > 1024) std::vector<std::uint64_t>().swap(slow_);
  }

  std::map<std::uint64_t, Client> clients_;  // by id: join order
  absl::flat_hash_map<std::string, std::uint64_t> by_nick_;
  std::vector<std::uint64_t> slow_;  // clients to drop, each once (Client::marked_slow)
  static constexpr std::size_t kJoinBatch = 256;
  static constexpr std::chrono::milliseconds kJoinWindow{20};
  std::vector<std::string> joined_;  // nicks that joined, not yet announced (announce_joins)
  Clock::time_point join_deadline_;  // when joined_ is announced at the latest
  bool stopping_ = false;
};

void client_main(weft::net::TcpStream stream, std::uint64_t id, const weft::Chan<Event>& events,
                 const ServerOptions& opts) {
  auto conn = std::make_shared<Conn>(std::move(stream));
  weft::Chan<std::string> out(opts.out_queue);
  weft::Task<void> writer = weft::spawn(weft::FiberOptions{.name = "chat-writer"}, [conn, out] {
    std::string batch;
    for (;;) {
      std::optional<std::string> line = out.recv();
      if (!line) return;  // closed by the hub: everything queued has been written
      batch = std::move(*line);
      // Whatever else is queued goes out in the same write: one syscall per wake-up, not per
      // line, so a reading client keeps up with bursts.
      while (batch.size() < 64 * 1024) {
        line = out.try_recv();
        if (!line) break;
        batch += *line;
      }
      if (!conn->stream.write_all(batch).ok()) {
        conn->stream.set_read_deadline(Clock::now());  // the reader leaves too
        return;
      }
    }
  });
  events.send(Join{id, conn, out});

  LineFramer framer(opts.max_line);
  Leave leave{id, "", ""};
  bool hung_up = false;  // the peer closed or reset: nothing left to linger for
  char buf[4096];
  std::string line;
  for (bool done = false; !done;) {
    absl::StatusOr<std::size_t> n = conn->stream.read(buf, sizeof buf);
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
  }
  events.send(std::move(leave));
  // The hub closes `out` on the Leave (or has dropped us); give the writer a bounded time to
  // flush the last lines, then wait for it.
  conn->stream.set_write_deadline(Clock::now() + opts.flush_timeout);
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
      weft::spawn(weft::FiberOptions{.name = "chat-hub"}, [events] { Hub().run(events); });
  weft::net::Server server(std::move(listener));
  std::atomic<std::uint64_t> next_id{0};
  weft::Task<absl::Status> serving = weft::spawn(weft::FiberOptions{.name = "chat-accept"}, [&] {
    return server.serve(
        [&](weft::net::TcpStream& s, const weft::Context&) {
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
