// examples/chat_server: the line protocol as pure code, then the server in-process over real
// sockets: join/leave notices, one broadcast order for everyone, commands, oversized lines,
// binary garbage, abrupt disconnects, a client too slow to keep up, and stop.
#include "chat_server.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include <weft/weft.hpp>

#include "chat_protocol.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Protocol

std::vector<std::string> frame_all(std::string_view in, std::size_t chunk, std::size_t max_line,
                                   bool* too_long) {
  chat::LineFramer f(max_line);
  std::vector<std::string> lines;
  *too_long = false;
  std::string line;
  for (std::size_t i = 0; i < in.size(); i += chunk) {
    f.feed(in.substr(i, chunk));
    for (;;) {
      const auto r = f.next(&line);
      if (r == chat::LineFramer::Next::kLine) {
        lines.push_back(line);
        continue;
      }
      if (r == chat::LineFramer::Next::kTooLong) {
        *too_long = true;
        return lines;
      }
      break;
    }
  }
  return lines;
}

TEST(ChatProtocol, LineFraming) {
  const std::string in = "hello\r\nworld\n\n\r\nlast without newline";
  for (std::size_t chunk : {1, 2, 3, 5, 100}) {
    bool too_long = false;
    EXPECT_EQ(frame_all(in, chunk, 100, &too_long),
              (std::vector<std::string>{"hello", "world", "", ""}))
        << chunk;
    EXPECT_FALSE(too_long);
  }
}

TEST(ChatProtocol, LineLimit) {
  bool too_long = false;
  // Exactly the limit is fine, with either terminator.
  EXPECT_EQ(
      frame_all(std::string(10, 'a') + "\r\n" + std::string(10, 'b') + "\n", 1, 10, &too_long),
      (std::vector<std::string>{std::string(10, 'a'), std::string(10, 'b')}));
  EXPECT_FALSE(too_long);
  // One byte more fails, with or without a newline ever coming.
  for (std::size_t chunk : {1, 4, 100}) {
    EXPECT_TRUE(frame_all("ok\n" + std::string(11, 'a') + "\n", chunk, 10, &too_long).size() == 1);
    EXPECT_TRUE(too_long);
    EXPECT_TRUE(frame_all(std::string(5000, 'a'), chunk, 10, &too_long).empty());
    EXPECT_TRUE(too_long);
  }
  // "\r" then the rest: a line of 10 with its '\r' pending is not yet too long.
  chat::LineFramer f(10);
  std::string line;
  f.feed(std::string(10, 'a') + "\r");
  EXPECT_EQ(f.next(&line), chat::LineFramer::Next::kNeedMore);
  f.feed("\n");
  EXPECT_EQ(f.next(&line), chat::LineFramer::Next::kLine);
  EXPECT_EQ(line, std::string(10, 'a'));
}

TEST(ChatProtocol, Commands) {
  using K = chat::Command::Kind;
  EXPECT_EQ(chat::parse_line("").kind, K::kEmpty);
  EXPECT_EQ(chat::parse_line("  \t").kind, K::kEmpty);
  EXPECT_EQ(chat::parse_line("hi there").kind, K::kMessage);
  EXPECT_EQ(chat::parse_line("hi there").arg, "hi there");
  EXPECT_EQ(chat::parse_line("/nick  bob ").kind, K::kNick);
  EXPECT_EQ(chat::parse_line("/nick  bob ").arg, "bob");
  EXPECT_EQ(chat::parse_line("/me waves").arg, "waves");
  EXPECT_EQ(chat::parse_line("/who").kind, K::kWho);
  EXPECT_EQ(chat::parse_line("/quit bye all").kind, K::kQuit);
  EXPECT_EQ(chat::parse_line("/help").kind, K::kHelp);
  EXPECT_EQ(chat::parse_line("/frob x").kind, K::kUnknown);
  EXPECT_EQ(chat::parse_line("/frob x").arg, "frob");
  EXPECT_EQ(chat::parse_line("//etc/passwd").kind, K::kMessage);
  EXPECT_EQ(chat::parse_line("//etc/passwd").arg, "/etc/passwd");
  EXPECT_EQ(chat::parse_line("/").kind, K::kMessage);
  EXPECT_TRUE(chat::valid_nick("bob_2-x"));
  EXPECT_FALSE(chat::valid_nick(""));
  EXPECT_FALSE(chat::valid_nick("has space"));
  EXPECT_FALSE(chat::valid_nick(std::string(33, 'a')));
  EXPECT_FALSE(chat::valid_nick("caf\xc3\xa9"));
}

TEST(ChatProtocol, Sanitize) {
  EXPECT_EQ(chat::sanitize("plain text"), "plain text");
  EXPECT_EQ(chat::sanitize("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(chat::sanitize(std::string("\x00\x01\x1b[2Jhi\xff\xfe\xc3\x28 ok\ttab\x7f", 20)),
            "???[2Jhi??"
            "?( ok tab?");
  EXPECT_EQ(chat::sanitize("\xc2\x9b"), "?");             // C1 control (CSI)
  EXPECT_EQ(chat::sanitize("\xc0\xaf"), "??");            // overlong '/'
  EXPECT_EQ(chat::sanitize("\xed\xa0\x80"), "???");       // surrogate
  EXPECT_EQ(chat::sanitize("\xf4\x90\x80\x80"), "????");  // above U+10FFFF
  EXPECT_EQ(chat::sanitize("\xe2\x82"), "??");            // truncated
  std::mt19937 rng(1);
  for (int i = 0; i < 1000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& ch : s) ch = static_cast<char>(rng());
    const std::string clean = chat::sanitize(s);
    EXPECT_TRUE(chat::is_valid_utf8(clean));
    for (char ch : clean) EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f);
  }
}

// ---------------------------------------------------------------------------------------------
// The server, in-process

// A line-oriented client for tests; every read has a deadline, so nothing here can hang.
class ChatClient {
 public:
  static ChatClient dial(const std::string& addr) {
    absl::StatusOr<weft::net::TcpStream> s = weft::net::dial_tcp(addr, 5s);
    if (!s.ok()) throw std::runtime_error(std::string(s.status().message()));
    ChatClient c(std::move(*s));
    // The welcome line names us.
    const std::optional<std::string> w = c.line();
    const std::string prefix = "* welcome, you are ";
    if (!w || w->rfind(prefix, 0) != 0) throw std::runtime_error("no welcome: " + w.value_or(""));
    c.nick_ = w->substr(prefix.size(), w->find(';') - prefix.size());
    return c;
  }
  explicit ChatClient(weft::net::TcpStream s) : s_(std::move(s)) {}

  const std::string& nick() const { return nick_; }
  void set_nick(std::string n) { nick_ = std::move(n); }
  bool send(std::string_view bytes) { return s_.write_all(bytes).ok(); }

  // The next line (without "\n"), or nullopt at end of stream, on an error, or after `timeout`.
  std::optional<std::string> line(std::chrono::milliseconds timeout = 10s) {
    s_.set_read_deadline(std::chrono::steady_clock::now() + timeout);
    for (;;) {
      const std::size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      const std::size_t have = buf_.size();
      buf_.resize(have + 65536);  // on the heap: fiber stacks are small
      absl::StatusOr<std::size_t> n = s_.read(buf_.data() + have, 65536);
      buf_.resize(have + (n.ok() ? *n : 0));
      if (!n.ok() || *n == 0) return std::nullopt;
    }
  }
  // Reads lines until one equals `want`; false if the stream ends or 10 s pass first.
  bool expect(const std::string& want) {
    for (;;) {
      std::optional<std::string> l = line();
      if (!l) {
        ADD_FAILURE() << nick_ << ": never got " << testing::PrintToString(want);
        return false;
      }
      if (*l == want) return true;
    }
  }
  // Waits for the announcement that `nick` joined: "* NICK joined", or a batch of joins, "* A,
  // NICK, B joined" (the hub batches the joins of a short window).
  bool expect_joined(const std::string& nick) {
    for (;;) {
      std::optional<std::string> l = line();
      if (!l) {
        ADD_FAILURE() << nick_ << ": never saw " << nick << " join";
        return false;
      }
      if (l->rfind("* ", 0) != 0 || !l->ends_with(" joined")) continue;
      const std::string names = ", " + l->substr(2, l->size() - 2 - 7) + ", ";
      if (names.find(", " + nick + ", ") != std::string::npos) return true;
    }
  }
  // Reads the stream to its end (within 10 s); true if it ended (close or reset).
  bool expect_closed() {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    s_.set_read_deadline(deadline);
    char tmp[4096];
    for (;;) {
      absl::StatusOr<std::size_t> n = s_.read(tmp, sizeof tmp);
      if (n.ok() && *n == 0) return true;
      if (!n.ok()) return n.status().code() != absl::StatusCode::kDeadlineExceeded;
    }
  }
  weft::net::TcpStream& stream() { return s_; }

 private:
  weft::net::TcpStream s_;
  std::string buf_;
  std::string nick_;
};

weft::Options two_workers() {
  weft::Options o;
  o.workers = 2;
  return o;
}

// Clients a test leaves open on purpose across the stop; closed after it.
std::vector<ChatClient> g_left_open;

template <class Body>
void with_server(Body body, chat::ServerOptions opts = {}) {
  weft::run(
      [&] {
        absl::StatusOr<weft::net::TcpListener> l = weft::net::listen_tcp("127.0.0.1:0");
        ASSERT_TRUE(l.ok()) << l.status();
        const std::string addr = l->local_addr();
        weft::Chan<int> stop(1);
        weft::Task<void> server = weft::spawn(
            [&, l = std::move(*l)]() mutable { chat::run_chat_server(std::move(l), stop, opts); });
        body(addr);
        stop.send(1);
        const bool returned = weft_test::join_within(server, 10s);
        EXPECT_TRUE(returned) << "run_chat_server() did not return within 10 s of stop";
        g_left_open.clear();
        if (!returned) std::abort();  // a fiber still uses this frame
      },
      two_workers());
}

TEST(ChatServer, JoinMessagesAndLeave) {
  with_server([](const std::string& addr) {
    ChatClient a = ChatClient::dial(addr);
    ASSERT_TRUE(a.expect_joined(a.nick()));
    ChatClient b = ChatClient::dial(addr);
    ASSERT_TRUE(b.expect_joined(b.nick()));
    ASSERT_TRUE(a.expect_joined(b.nick()));
    ASSERT_TRUE(a.send("hello from a\n"));
    ASSERT_TRUE(a.expect("<" + a.nick() + "> hello from a"));  // the sender sees it too
    ASSERT_TRUE(b.expect("<" + a.nick() + "> hello from a"));
    ASSERT_TRUE(b.send("/quit\r\n"));
    ASSERT_TRUE(b.expect("* bye"));
    EXPECT_TRUE(b.expect_closed());
    ASSERT_TRUE(a.expect("* " + b.nick() + " left"));
  });
}

// A crowd joining at once is announced in batches ("* a, b, c joined"): a broadcast per join was
// O(n^2) lines and held the hub for seconds. Every nick is announced exactly once to a client
// that was there first, and /who lists everyone afterwards.
TEST(ChatServer, AJoiningCrowdIsAnnouncedOnceEachInBatches) {
  with_server([](const std::string& addr) {
    const int kCrowd = weft_test::kSanitized ? 400 : 2000;
    ChatClient watcher = ChatClient::dial(addr);
    std::map<std::string, int> announced;  // nick -> times
    int lines = 0;
    weft::Task<bool> reader = weft::spawn([&] {
      while (static_cast<int>(announced.size()) < kCrowd + 1) {
        std::optional<std::string> l = watcher.line();
        if (!l) return false;
        if (l->rfind("* ", 0) != 0 || !l->ends_with(" joined")) continue;
        ++lines;
        const std::string names = l->substr(2, l->size() - 2 - 7);
        for (std::size_t at = 0; at <= names.size();) {
          const std::size_t comma = names.find(", ", at);
          ++announced[names.substr(at,
                                   comma == std::string::npos ? std::string::npos : comma - at)];
          if (comma == std::string::npos) break;
          at = comma + 2;
        }
      }
      return true;
    });
    std::vector<std::optional<ChatClient>> crowd(static_cast<std::size_t>(kCrowd));
    weft::WaitGroup wg;
    std::atomic<int> failed{0};
    for (int f = 0; f < 50; ++f) {
      wg.add(1);
      weft::go([&, f] {
        for (int i = f; i < kCrowd; i += 50) {
          try {
            crowd[static_cast<std::size_t>(i)].emplace(ChatClient::dial(addr));
          } catch (const std::exception&) {
            failed.fetch_add(1);
          }
        }
        wg.done();
      });
    }
    wg.wait();
    ASSERT_EQ(failed.load(), 0);
    ASSERT_TRUE(reader.join()) << "the watcher stopped hearing joins after " << announced.size();
    EXPECT_EQ(announced.count(watcher.nick()), 1u);
    for (const std::optional<ChatClient>& c : crowd) {
      EXPECT_EQ(announced[c->nick()], 1) << c->nick() << " announced that many times";
    }
    EXPECT_EQ(static_cast<int>(announced.size()), kCrowd + 1);
    RecordProperty("join_lines", lines);
    ASSERT_TRUE(watcher.send("/who\n"));
    std::optional<std::string> who = watcher.line();
    while (who && who->rfind("* online (", 0) != 0) who = watcher.line();
    ASSERT_TRUE(who.has_value());
    EXPECT_EQ(who->rfind("* online (" + std::to_string(kCrowd + 1) + "):", 0), 0u) << *who;
  });
}

TEST(ChatServer, EveryoneSeesTheSameOrder) {
  with_server([](const std::string& addr) {
    constexpr int kClients = 4;
    const int per_client = static_cast<int>(weft_test::scaled(200, 4));
    std::vector<ChatClient> cs;
    for (int i = 0; i < kClients; ++i) cs.push_back(ChatClient::dial(addr));
    // Wait until everyone has seen everyone join, so all are in the room before the messages.
    for (auto& c : cs) ASSERT_TRUE(c.expect_joined(cs.back().nick()));
    std::vector<std::vector<std::string>> seen(kClients);
    weft::WaitGroup wg;
    for (int i = 0; i < kClients; ++i) {
      wg.add(2);
      weft::go([&, i] {  // sender: lines sent in several writes of several lines
        std::string batch;
        for (int m = 0; m < per_client; ++m) {
          batch += "msg " + std::to_string(m) + " from " + std::to_string(i) + "\n";
          if (m % 7 == 6) {
            EXPECT_TRUE(cs[i].send(batch));
            batch.clear();
          }
        }
        EXPECT_TRUE(cs[i].send(batch));
        wg.done();
      });
      weft::go([&, i] {  // reader
        while (static_cast<int>(seen[i].size()) < kClients * per_client) {
          std::optional<std::string> l = cs[i].line();
          if (!l) break;
          if (!l->empty() && (*l)[0] == '<') seen[i].push_back(*l);
        }
        wg.done();
      });
    }
    wg.wait();
    for (int i = 0; i < kClients; ++i) {
      ASSERT_EQ(static_cast<int>(seen[i].size()), kClients * per_client) << "client " << i;
      EXPECT_EQ(seen[i], seen[0]) << "client " << i << " saw another order";
    }
    // Each sender's lines keep their order.
    std::map<std::string, int> next;
    for (const std::string& l : seen[0]) {
      const std::string from = l.substr(0, l.find('>'));
      const int m = std::stoi(l.substr(l.find("msg ") + 4));
      EXPECT_EQ(m, next[from]) << l;
      next[from] = m + 1;
    }
  });
}

TEST(ChatServer, Commands) {
  with_server([](const std::string& addr) {
    ChatClient a = ChatClient::dial(addr);
    ChatClient b = ChatClient::dial(addr);
    ASSERT_TRUE(a.expect_joined(b.nick()));
    const std::string old = a.nick();
    ASSERT_TRUE(a.send("/nick alice\n"));
    ASSERT_TRUE(b.expect("* " + old + " is now known as alice"));
    ASSERT_TRUE(a.expect("* " + old + " is now known as alice"));
    ASSERT_TRUE(b.send("/nick alice\n"));
    ASSERT_TRUE(b.expect("! nick alice is taken"));
    ASSERT_TRUE(b.send("/nick bad nick!\n"));
    ASSERT_TRUE(b.expect("! a nick is 1-32 of A-Z a-z 0-9 _ -"));
    ASSERT_TRUE(b.send("/who\n"));
    ASSERT_TRUE(b.expect("* online (2): alice, " + b.nick()));
    ASSERT_TRUE(a.send("/me waves\n"));
    ASSERT_TRUE(b.expect("* alice waves"));
    ASSERT_TRUE(a.send("/frobnicate\n"));
    ASSERT_TRUE(a.expect("! unknown command /frobnicate (try /help)"));
    ASSERT_TRUE(a.send("//not a command\n"));
    ASSERT_TRUE(b.expect("<alice> /not a command"));
    ASSERT_TRUE(a.send("/help\n"));
    std::optional<std::string> help = a.line();
    while (help && help->rfind("* commands:", 0) != 0) help = a.line();
    EXPECT_TRUE(help.has_value());
  });
}

TEST(ChatServer, OversizedLineIsAnErrorAndADisconnect) {
  with_server([](const std::string& addr) {
    ChatClient watcher = ChatClient::dial(addr);
    for (const bool with_newline : {true, false}) {
      ChatClient big = ChatClient::dial(addr);
      ASSERT_TRUE(watcher.expect_joined(big.nick()));
      ASSERT_TRUE(big.send(std::string(20000, 'x') + (with_newline ? "\n" : "")));
      ASSERT_TRUE(big.expect("! line too long (the limit is 4096 bytes); closing"));
      EXPECT_TRUE(big.expect_closed());
      ASSERT_TRUE(watcher.expect("* " + big.nick() + " left (line too long)"));
    }
    // The longest allowed line goes through.
    ChatClient ok = ChatClient::dial(addr);
    ASSERT_TRUE(ok.send(std::string(4096 - 1, 'y') + "z\r\n"));
    ASSERT_TRUE(watcher.expect("<" + ok.nick() + "> " + std::string(4095, 'y') + "z"));
  });
}

TEST(ChatServer, BinaryGarbageIsSanitizedAndHarmless) {
  with_server([](const std::string& addr) {
    ChatClient watcher = ChatClient::dial(addr);
    ChatClient g = ChatClient::dial(addr);
    ASSERT_TRUE(g.send(std::string("\x00\x01\x1b[2Jhi\xff\xfe\xc3\x28 ok \xc3\xa9\n", 19)));
    ASSERT_TRUE(watcher.expect("<" + g.nick() +
                               "> ???[2Jhi??"
                               "?( ok \xc3\xa9"));
    // Lots of random bytes from several clients: lines of junk, nothing breaks.
    std::mt19937 rng(7);
    for (int c = 0; c < 8; ++c) {
      ChatClient junk = ChatClient::dial(addr);
      std::string bytes(1 + rng() % 20000, '\0');
      for (char& ch : bytes) ch = static_cast<char>(rng());
      (void)junk.send(bytes);
      // Whatever came back is valid UTF-8 without control bytes.
      junk.stream().set_read_deadline(std::chrono::steady_clock::now() + 200ms);
      for (;;) {
        std::optional<std::string> l = junk.line(200ms);
        if (!l) break;
        EXPECT_TRUE(chat::is_valid_utf8(*l));
        for (char ch : *l) EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f);
      }
    }
    ASSERT_TRUE(g.send("still fine\n"));
    ASSERT_TRUE(watcher.expect("<" + g.nick() + "> still fine"));
  });
}

TEST(ChatServer, AbruptDisconnectsAreNoticed) {
  with_server([](const std::string& addr) {
    ChatClient watcher = ChatClient::dial(addr);
    {
      ChatClient gone = ChatClient::dial(addr);
      ASSERT_TRUE(watcher.expect_joined(gone.nick()));
      ASSERT_TRUE(gone.send("half a li"));
      gone.stream().close();  // FIN mid-line
      ASSERT_TRUE(watcher.expect("* " + gone.nick() + " left"));
    }
    {
      ChatClient reset = ChatClient::dial(addr);
      ASSERT_TRUE(watcher.expect_joined(reset.nick()));
      const linger lg{1, 0};  // close() sends a reset
      ASSERT_EQ(setsockopt(reset.stream().fd(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
      reset.stream().close();
      ASSERT_TRUE(watcher.expect("* " + reset.nick() + " left"));
    }
    ASSERT_TRUE(watcher.send("/who\n"));
    ASSERT_TRUE(watcher.expect("* online (1): " + watcher.nick()));
  });
}

TEST(ChatServer, ASlowClientIsDroppedAndDoesNotStallOthers) {
  chat::ServerOptions opts;
  opts.max_line = 64 * 1024;
  opts.out_queue_bytes = 16 * 60000;  // sixteen of the flooder's lines
  with_server(
      [](const std::string& addr) {
        ChatClient slow = ChatClient::dial(addr);  // never reads again
        const int small = 4096;
        setsockopt(slow.stream().fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        ChatClient flooder = ChatClient::dial(addr);
        ChatClient observer = ChatClient::dial(addr);
        ASSERT_TRUE(flooder.expect_joined(observer.nick()));
        std::atomic<bool> dropped{false};
        weft::WaitGroup wg;
        wg.add(1);
        const std::string drop_notice = "* " + slow.nick() + " left (too slow: dropped)";
        const std::string mine = "<" + flooder.nick() + "> ";
        weft::Chan<int> observed(4096);  // one per flooder line the observer has read
        weft::go([&] {
          for (;;) {
            std::optional<std::string> l = observer.line(30s);
            if (!l) break;
            if (*l == drop_notice) dropped.store(true);
            if (*l == mine + "done") break;
            if (l->rfind(mine, 0) == 0) observed.try_send(1);
          }
          observed.close();
          wg.done();
        });
        // Paced: each line goes out once the flooder has its own copy back and the observer has
        // read it too, so neither ever has more than a line queued (however the fibers are
        // scheduled, they keep up), while the slow client's queue (and socket buffers) only
        // fill. A lambda, so a failed ASSERT still reaches the join below (the observer fiber
        // uses this frame).
        int sent = 0;
        [&] {
          const std::string payload(60000, 'p');
          for (; sent < 4000 && !dropped.load(); ++sent) {
            ASSERT_TRUE(flooder.send(payload + "\n"));
            std::optional<std::string> echo = flooder.line(30s);
            while (echo && echo->rfind(mine, 0) != 0) echo = flooder.line(30s);
            ASSERT_TRUE(echo.has_value()) << "the flooder lost its connection after " << sent;
            ASSERT_TRUE(observed.recv().has_value())
                << "the observer lost its connection after " << sent;
          }
        }();
        if (!flooder.send("done\n"))
          observer.stream().set_deadline(std::chrono::steady_clock::now());
        wg.wait();
        EXPECT_TRUE(dropped.load()) << "the slow client was not dropped after " << sent << " lines";
        // The others carry on.
        ASSERT_TRUE(observer.send("/who\n"));
        ASSERT_TRUE(observer.expect("* online (2): " + flooder.nick() + ", " + observer.nick()));
        EXPECT_TRUE(slow.expect_closed());
      },
      opts);
}

// The queue is bounded in bytes, and a line longer than the whole budget still reaches a client
// whose queue is empty (a /who of a large room): here every line is longer than the budget, and
// a client that reads each reply before it asks again gets every one.
TEST(ChatServer, ALineOverTheQueueBudgetStillReachesAClientThatKeepsUp) {
  chat::ServerOptions opts;
  opts.out_queue_bytes = 1;
  with_server(
      [](const std::string& addr) {
        ChatClient c = ChatClient::dial(addr);
        ASSERT_TRUE(c.expect_joined(c.nick()));  // read: the queue is empty again
        for (int i = 0; i < 3; ++i) {
          ASSERT_TRUE(c.send("/help\n"));
          std::optional<std::string> help = c.line();
          ASSERT_TRUE(help.has_value()) << "dropped at reply " << i;
          EXPECT_EQ(help->rfind("* commands: ", 0), 0u) << *help;
          ASSERT_TRUE(c.send("/who\n"));
          ASSERT_TRUE(c.expect("* online (1): " + c.nick()));
        }
      },
      opts);
}

TEST(ChatServer, StopEndsConnectedClients) {
  with_server([](const std::string& addr) {
    for (int i = 0; i < 10; ++i) {
      g_left_open.push_back(ChatClient::dial(addr));
      if (i % 2) {
        ASSERT_TRUE(g_left_open.back().send("a line without its newline"));
      }
    }
  });
}

}  // namespace
