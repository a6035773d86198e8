// examples/resp_server: the RESP2 parser, the glob matcher and the commands as pure code, then
// the server in-process over real sockets: pipelining, big values, and malformed input
// (truncated, oversized, negative and non-numeric lengths, garbage, huge inline lines, many
// garbage connections at once) while a well-behaved client keeps getting correct replies.
// The redis-cli / redis-benchmark check is tests/resp_server_redis_tools.sh.
#include "resp_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <vector>
#include <weft/weft.hpp>

#include "resp_commands.hpp"
#include "resp_parser.hpp"
#include "resp_store.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using resp::Parser;
using Result = resp::Parser::Result;

// ---------------------------------------------------------------------------------------------
// Parser

struct Parsed {
  std::vector<std::vector<std::string>> commands;
  bool error = false;
  std::string message;
  std::size_t left = 0;  // bytes not consumed at the end
};

// Feeds `input` in chunks of `chunk` bytes (0: all at once), as a server would.
Parsed parse_all(std::string_view input, std::size_t chunk = 0, resp::Limits limits = {}) {
  Parser p(limits);
  Parsed out;
  std::string buf;
  std::size_t fed = 0;
  for (;;) {
    const std::size_t n = chunk == 0 ? input.size() - fed : std::min(chunk, input.size() - fed);
    buf.append(input.substr(fed, n));
    fed += n;
    for (;;) {
      const Result r = p.parse(buf);
      if (r == Result::kCommand) {
        out.commands.emplace_back(p.args().begin(), p.args().end());
      } else if (r == Result::kError) {
        out.error = true;
        out.message = p.error();
        return out;
      }
      buf.erase(0, p.consumed());
      if (r != Result::kCommand) break;
    }
    if (fed == input.size()) break;
  }
  out.left = buf.size();
  return out;
}

using Cmds = std::vector<std::vector<std::string>>;

TEST(RespParser, MultibulkAndPipelining) {
  const std::string in =
      "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\nal\r\n*2\r\n$3\r\nGET\r\n$"
      "0\r\n\r\n";
  const Cmds want = {{"PING"}, {"SET", "k", "v\r\nal"}, {"GET", ""}};
  for (std::size_t chunk : {0, 1, 2, 3, 7, 100}) {
    const Parsed p = parse_all(in, chunk);
    EXPECT_FALSE(p.error) << p.message;
    EXPECT_EQ(p.commands, want) << "chunk " << chunk;
    EXPECT_EQ(p.left, 0u);
  }
}

TEST(RespParser, BinarySafeBulk) {
  std::string value("a\0b\r\n\xff", 6);
  const std::string in = "*2\r\n$4\r\nECHO\r\n$6\r\n" + value + "\r\n";
  const Parsed p = parse_all(in, 1);
  ASSERT_EQ(p.commands.size(), 1u);
  EXPECT_EQ(p.commands[0][1], value);
}

TEST(RespParser, InlineCommandsAsRedis) {
  const Parsed p =
      parse_all("PING\r\nset k \"a b\\x41\\n\"\nget 'it\\'s'\r\n  \r\n\necho \"\"  x\r\n", 1);
  EXPECT_FALSE(p.error) << p.message;
  const Cmds want = {{"PING"}, {"set", "k", "a bA\n"}, {"get", "it's"}, {"echo", "", "x"}};
  EXPECT_EQ(p.commands, want);
}

TEST(RespParser, EmptyCommandsAreSkipped) {
  const Parsed p = parse_all("*0\r\n*-1\r\n\r\n*1\r\n$4\r\nPING\r\n", 1);
  EXPECT_FALSE(p.error);
  EXPECT_EQ(p.commands, (Cmds{{"PING"}}));
}

TEST(RespParser, IncompleteWaitsForMore) {
  for (const char* in : {"*", "*2", "*2\r", "*2\r\n$3", "*2\r\n$3\r\nGET", "*2\r\n$3\r\nGET\r\n",
                         "*2\r\n$3\r\nGET\r\n$1\r\nk\r", "GET k"}) {
    const Parsed p = parse_all(in);
    EXPECT_FALSE(p.error) << in << ": " << p.message;
    EXPECT_TRUE(p.commands.empty()) << in;
    EXPECT_EQ(p.left, std::strlen(in)) << in;
  }
}

TEST(RespParser, ErrorsAsRedis) {
  resp::Limits small;
  small.max_bulk_len = 1000;
  small.max_array_len = 10;
  small.max_inline_len = 100;
  struct Case {
    std::string in;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"*abc\r\n", "invalid multibulk length"},
      {"*11\r\n", "invalid multibulk length"},
      {"*1x\r\n", "invalid multibulk length"},
      {"*+1\r\n", "invalid multibulk length"},
      {"*01\r\n", "invalid multibulk length"},
      {"*99999999999999999999999\r\n", "invalid multibulk length"},
      {"*1\r\n$-1\r\n", "invalid bulk length"},
      {"*1\r\n$abc\r\n", "invalid bulk length"},
      {"*1\r\n$1001\r\n", "invalid bulk length"},
      {"*1\r\n$\r\n", "invalid bulk length"},
      {"*1\r\n:1\r\n", "expected '$', got ':'"},
      {"*1\r\n\x01", "expected '$', got '\\x01'"},
      {"*1\r\n$3\r\nabcde\r\n", "expected CRLF after a bulk string of length 3"},
      {"*1\r\n$3\r\nabc\rX", "expected CRLF after a bulk string of length 3"},
      {"*1\rX", "expected '\\n' after '\\r', got 'X'"},
      {std::string(200, 'a'), "too big inline request"},
      {"*" + std::string(200, '1'), "too big mbulk count string"},
      {"*1\r\n$" + std::string(200, '1'), "too big bulk count string"},
      {"set k \"unterminated\r\n", "unbalanced quotes in request"},
      {"set k \"a\"b\r\n", "unbalanced quotes in request"},
      {"set k 'a\r\n", "unbalanced quotes in request"},
  };
  for (const Case& c : cases) {
    for (std::size_t chunk : {0, 1}) {
      const Parsed p = parse_all(c.in, chunk, small);
      EXPECT_TRUE(p.error) << testing::PrintToString(c.in) << " chunk " << chunk;
      EXPECT_EQ(p.message, c.error) << testing::PrintToString(c.in);
    }
  }
}

TEST(RespParser, CommandLimit) {
  resp::Limits l;
  l.max_command_len = 64;
  EXPECT_TRUE(parse_all("*1\r\n$40\r\n" + std::string(40, 'x') + "\r\n", 0, l).commands.size() ==
              1);
  const Parsed p = parse_all("*2\r\n$40\r\n" + std::string(40, 'x') + "\r\n$40\r\n", 0, l);
  EXPECT_TRUE(p.error);
}

TEST(RespParser, StaysFailedUntilReset) {
  Parser p;
  EXPECT_EQ(p.parse("*x\r\n"), Result::kError);
  EXPECT_EQ(p.parse("*1\r\n$4\r\nPING\r\n"), Result::kError);
  p.reset();
  EXPECT_EQ(p.parse("*1\r\n$4\r\nPING\r\n"), Result::kCommand);
}

TEST(RespParser, Int64AsRedis) {
  EXPECT_EQ(resp::parse_int64("0"), 0);
  EXPECT_EQ(resp::parse_int64("-1"), -1);
  EXPECT_EQ(resp::parse_int64("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(resp::parse_int64("-9223372036854775808"), INT64_MIN);
  for (const char* bad : {"", "-", "+1", "01", "-0", " 1", "1 ", "1.5", "9223372036854775808",
                          "-9223372036854775809", "99999999999999999999"}) {
    EXPECT_FALSE(resp::parse_int64(bad).has_value()) << bad;
  }
}

TEST(RespGlob, AsRedis) {
  using resp::glob_match;
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("h?llo", "hello"));
  EXPECT_FALSE(glob_match("h?llo", "hllo"));
  EXPECT_TRUE(glob_match("h*llo", "hllo"));
  EXPECT_TRUE(glob_match("h*llo", "heeeello"));
  EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
  EXPECT_FALSE(glob_match("h[ae]llo", "hillo"));
  EXPECT_TRUE(glob_match("h[^e]llo", "hallo"));
  EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
  EXPECT_TRUE(glob_match("h[a-b]llo", "hbllo"));
  EXPECT_TRUE(glob_match("h[b-a]llo", "hallo"));  // reversed ranges work, as in Redis
  EXPECT_FALSE(glob_match("h[a-b]llo", "hcllo"));
  EXPECT_TRUE(glob_match("a\\*b", "a*b"));
  EXPECT_FALSE(glob_match("a\\*b", "axb"));
  EXPECT_TRUE(glob_match("[\\]]", "]"));
  EXPECT_TRUE(glob_match("*a*b*c*", "xxaxxbxxcxx"));
  EXPECT_FALSE(glob_match("*a*b*c*", "xxaxxcxxbxx"));
  EXPECT_TRUE(glob_match("user:*:name", "user:42:name"));
  EXPECT_FALSE(glob_match("user:*:name", "user:42:age"));
  // Would be exponential with naive backtracking.
  EXPECT_FALSE(glob_match("a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", std::string(5000, 'a')));
}

// ---------------------------------------------------------------------------------------------
// Commands, with a clock the test moves

std::int64_t g_fake_now = 1'000'000;
std::int64_t fake_now() { return g_fake_now; }

class RespCommands : public testing::Test {
 protected:
  resp::Store store{&fake_now};
  resp::Session session;

  // The raw reply to one command given as words.
  std::string run(std::vector<std::string> words) {
    std::vector<std::string_view> args(words.begin(), words.end());
    std::string out;
    resp::execute(store, args, session, &out);
    return out;
  }
};

TEST_F(RespCommands, PingEcho) {
  EXPECT_EQ(run({"PING"}), "+PONG\r\n");
  EXPECT_EQ(run({"ping", "hi"}), "$2\r\nhi\r\n");
  EXPECT_EQ(run({"PING", "a", "b"}), "-ERR wrong number of arguments for 'ping' command\r\n");
  EXPECT_EQ(run({"ECHO", "x y"}), "$3\r\nx y\r\n");
  EXPECT_EQ(run({"echo"}), "-ERR wrong number of arguments for 'echo' command\r\n");
}

TEST_F(RespCommands, SetGetDelExists) {
  EXPECT_EQ(run({"GET", "k"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v"}), "+OK\r\n");
  EXPECT_EQ(run({"GET", "k"}), "$1\r\nv\r\n");
  EXPECT_EQ(run({"SET", "k", ""}), "+OK\r\n");
  EXPECT_EQ(run({"GET", "k"}), "$0\r\n\r\n");
  EXPECT_EQ(run({"EXISTS", "k", "nope", "k"}), ":2\r\n");
  EXPECT_EQ(run({"DEL", "k", "nope", "k"}), ":1\r\n");
  EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
  EXPECT_EQ(run({"SET", "k"}), "-ERR wrong number of arguments for 'set' command\r\n");
}

TEST_F(RespCommands, SetOptions) {
  EXPECT_EQ(run({"SET", "k", "1", "NX"}), "+OK\r\n");
  EXPECT_EQ(run({"SET", "k", "2", "NX"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "other", "2", "XX"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "3", "XX", "GET"}), "$1\r\n1\r\n");
  EXPECT_EQ(run({"SET", "new", "3", "GET"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "NX", "XX"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "10", "PX", "10"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "BOGUS"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "x"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "0"}), "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "PX", "-5"}), "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "9223372036854775807"}),
            "-ERR invalid expire time in 'set' command\r\n");

  EXPECT_EQ(run({"SET", "k", "v", "ex", "10"}), "+OK\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":10\r\n");
  EXPECT_EQ(run({"SET", "k", "v2", "KEEPTTL"}), "+OK\r\n");
  EXPECT_EQ(run({"PTTL", "k"}), ":10000\r\n");
  EXPECT_EQ(run({"SET", "k", "v3"}), "+OK\r\n");  // a plain SET clears the TTL
  EXPECT_EQ(run({"TTL", "k"}), ":-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "PX", "1500"}), "+OK\r\n");
  EXPECT_EQ(run({"PTTL", "k"}), ":1500\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":2\r\n");  // rounded, as Redis
  g_fake_now += 1499;
  EXPECT_EQ(run({"GET", "k"}), "$1\r\nv\r\n");
  g_fake_now += 1;
  EXPECT_EQ(run({"GET", "k"}), "$-1\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":-2\r\n");
}

TEST_F(RespCommands, Incr) {
  EXPECT_EQ(run({"INCR", "n"}), ":1\r\n");
  EXPECT_EQ(run({"INCR", "n"}), ":2\r\n");
  EXPECT_EQ(run({"DECR", "n"}), ":1\r\n");
  EXPECT_EQ(run({"INCRBY", "n", "-11"}), ":-10\r\n");
  EXPECT_EQ(run({"DECRBY", "n", "5"}), ":-15\r\n");
  EXPECT_EQ(run({"GET", "n"}), "$3\r\n-15\r\n");
  const std::string not_int = "-ERR value is not an integer or out of range\r\n";
  run({"SET", "s", "abc"});
  EXPECT_EQ(run({"INCR", "s"}), not_int);
  run({"SET", "s", " 1"});
  EXPECT_EQ(run({"INCR", "s"}), not_int);
  run({"SET", "s", "9223372036854775807"});
  EXPECT_EQ(run({"INCR", "s"}), "-ERR increment or decrement would overflow\r\n");
  EXPECT_EQ(run({"INCRBY", "s", "x"}), not_int);
  // INCR keeps the TTL.
  run({"SET", "t", "5", "EX", "100"});
  EXPECT_EQ(run({"INCR", "t"}), ":6\r\n");
  EXPECT_EQ(run({"TTL", "t"}), ":100\r\n");
}

TEST_F(RespCommands, MsetMget) {
  EXPECT_EQ(run({"MSET", "a", "1", "b", "2"}), "+OK\r\n");
  EXPECT_EQ(run({"MGET", "a", "nope", "b"}), "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
  EXPECT_EQ(run({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'mset' command\r\n");
  // Many keys over many shards.
  std::vector<std::string> mset = {"MSET"};
  std::vector<std::string> mget = {"MGET"};
  std::string want = "*500\r\n";
  for (int i = 0; i < 500; ++i) {
    mset.push_back("key" + std::to_string(i));
    mset.push_back(std::to_string(i * 7));
    mget.push_back("key" + std::to_string(i));
    want += "$" + std::to_string(std::to_string(i * 7).size()) + "\r\n" + std::to_string(i * 7) +
            "\r\n";
  }
  EXPECT_EQ(run(mset), "+OK\r\n");
  EXPECT_EQ(run(mget), want);
}

TEST_F(RespCommands, ExpireTtl) {
  EXPECT_EQ(run({"TTL", "k"}), ":-2\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "10"}), ":0\r\n");
  run({"SET", "k", "v"});
  EXPECT_EQ(run({"TTL", "k"}), ":-1\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "10"}), ":1\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":10\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "20", "NX"}), ":0\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "5", "GT"}), ":0\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "20", "GT"}), ":1\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "30", "LT"}), ":0\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "15", "LT"}), ":1\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":15\r\n");
  EXPECT_EQ(run({"PERSIST", "k"}), ":1\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":-1\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "10", "XX"}), ":0\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "x"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "10", "NX", "XX"}),
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "9223372036854775807"}),
            "-ERR invalid expire time in 'expire' command\r\n");
  EXPECT_EQ(run({"PEXPIRE", "k", "2500"}), ":1\r\n");
  EXPECT_EQ(run({"PTTL", "k"}), ":2500\r\n");
  // A deadline not in the future deletes the key, as Redis.
  EXPECT_EQ(run({"EXPIRE", "k", "0"}), ":1\r\n");
  EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
  run({"SET", "k", "v"});
  EXPECT_EQ(run({"EXPIRE", "k", "-5"}), ":1\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":-2\r\n");
}

TEST_F(RespCommands, ActiveExpirySweeps) {
  for (int i = 0; i < 1000; ++i) run({"SET", "k" + std::to_string(i), "v", "PX", "100"});
  for (int i = 0; i < 10; ++i) run({"SET", "keep" + std::to_string(i), "v"});
  EXPECT_EQ(store.size(), 1010u);
  EXPECT_EQ(store.sweep(1000), 0u);  // nothing due yet
  g_fake_now += 100;
  EXPECT_EQ(store.sweep(1000), 1000u);
  EXPECT_EQ(store.size(), 10u);
  EXPECT_EQ(store.volatile_size(), 0u);
}

TEST_F(RespCommands, ReExpiringManyTimesKeepsTheHeapBounded) {
  run({"SET", "k", "v"});
  for (int i = 0; i < 20000; ++i) run({"PEXPIRE", "k", std::to_string(1000 + i)});
  EXPECT_EQ(run({"PTTL", "k"}), ":20999\r\n");
  g_fake_now += 21000;
  EXPECT_EQ(store.sweep(100000), 1u);
  EXPECT_EQ(store.size(), 0u);
}

TEST_F(RespCommands, KeysAndFlush) {
  run({"MSET", "hello", "1", "hallo", "2", "hxllo", "3", "hllo", "4", "heeeello", "5"});
  run({"SET", "gone", "x", "PX", "10"});
  auto keys = [&](const std::string& pattern) {
    std::vector<std::string> words = {"KEYS", pattern};
    std::string reply = run(words);
    // Parse the array of bulks and sort it.
    std::vector<std::string> out;
    std::size_t pos = reply.find("\r\n") + 2;
    while (pos < reply.size()) {
      const std::size_t eol = reply.find("\r\n", pos);
      const std::size_t len = std::stoul(reply.substr(pos + 1, eol - pos - 1));
      out.push_back(reply.substr(eol + 2, len));
      pos = eol + 2 + len + 2;
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(keys("h?llo"), (V{"hallo", "hello", "hxllo"}));
  EXPECT_EQ(keys("h*llo"), (V{"hallo", "heeeello", "hello", "hllo", "hxllo"}));
  EXPECT_EQ(keys("h[ae]llo"), (V{"hallo", "hello"}));
  EXPECT_EQ(keys("h[^e]llo"), (V{"hallo", "hxllo"}));
  EXPECT_EQ(keys("h[a-b]llo"), (V{"hallo"}));
  EXPECT_EQ(keys("*"), (V{"gone", "hallo", "heeeello", "hello", "hllo", "hxllo"}));
  g_fake_now += 10;
  EXPECT_EQ(keys("g*"), V{});
  EXPECT_EQ(run({"DBSIZE"}), ":6\r\n");  // counts the expired key not yet swept, as Redis
  EXPECT_EQ(run({"FLUSHALL"}), "+OK\r\n");
  EXPECT_EQ(run({"DBSIZE"}), ":0\r\n");
  EXPECT_EQ(run({"KEYS", "*"}), "*0\r\n");
  EXPECT_EQ(run({"FLUSHALL", "ASYNC"}), "+OK\r\n");
  EXPECT_EQ(run({"FLUSHALL", "NOW"}), "-ERR syntax error\r\n");
}

TEST_F(RespCommands, ConnectionAndIntrospection) {
  EXPECT_EQ(run({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ(run({"SELECT", "1"}), "-ERR DB index is out of range\r\n");
  EXPECT_EQ(run({"CONFIG", "GET", "save"}), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
  EXPECT_EQ(run({"CONFIG", "GET", "appendonly"}), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
  EXPECT_EQ(run({"CONFIG", "GET", "nothing*"}), "*0\r\n");
  EXPECT_EQ(run({"CONFIG", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try CONFIG HELP.\r\n");
  EXPECT_EQ(run({"COMMAND", "DOCS"}), "*0\r\n");
  EXPECT_EQ(run({"CLIENT", "SETNAME", "me"}), "+OK\r\n");
  EXPECT_EQ(run({"CLIENT", "GETNAME"}), "$2\r\nme\r\n");
  EXPECT_EQ(run({"INFO"}).substr(0, 1), "$");
  EXPECT_EQ(run({"HELLO", "3"}), "-NOPROTO sorry, this protocol version is not supported\r\n");
  EXPECT_EQ(run({"HELLO", "2", "SETNAME", "other"}).substr(0, 5), "*14\r\n");
  EXPECT_EQ(run({"CLIENT", "GETNAME"}), "$5\r\nother\r\n");
  EXPECT_FALSE(session.close_after);
  EXPECT_EQ(run({"QUIT"}), "+OK\r\n");
  EXPECT_TRUE(session.close_after);
}

TEST_F(RespCommands, UnknownCommandsAsRedis) {
  EXPECT_EQ(run({"NOPE", "a", "b"}),
            "-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n");
  EXPECT_EQ(run({"averyveryverylongcommandname"}),
            "-ERR unknown command 'averyveryverylongcommandname', with args beginning with: \r\n");
  // A name or argument with line breaks cannot break the reply's framing.
  EXPECT_EQ(run({"x\r\n+OK", "a\nb"}),
            "-ERR unknown command 'x  +OK', with args beginning with: 'a b' \r\n");
  // Long arguments are cut.
  const std::string reply = run({"NOPE", std::string(1000, 'a')});
  EXPECT_LT(reply.size(), 300u);
}

// ---------------------------------------------------------------------------------------------
// The server, in-process, over sockets

weft::Options two_workers() {
  weft::Options o;
  o.workers = 2;
  return o;
}

// A blocking RESP client for tests: every call has a deadline, so nothing here can hang.
class Client {
 public:
  static Client dial(const std::string& addr) {
    absl::StatusOr<weft::net::TcpStream> s = weft::net::dial_tcp(addr, 5s);
    if (!s.ok()) throw std::runtime_error(std::string(s.status().message()));
    return Client(std::move(*s));
  }
  explicit Client(weft::net::TcpStream s) : s_(std::move(s)) {
    s_.set_deadline(std::chrono::steady_clock::now() + 30s);
  }

  bool send(std::string_view bytes) { return s_.write_all(bytes).ok(); }

  static std::string command(const std::vector<std::string>& words) {
    std::string out = "*" + std::to_string(words.size()) + "\r\n";
    for (const std::string& w : words) out += "$" + std::to_string(w.size()) + "\r\n" + w + "\r\n";
    return out;
  }
  // Sends one command and reads its reply.
  std::string call(const std::vector<std::string>& words) {
    if (!send(command(words))) return "<send failed>";
    return reply();
  }

  // One reply, raw ("+OK\r\n", "$1\r\nv\r\n", ...); "<eof>" at end of stream, "<error: ...>"
  // on a read error.
  std::string reply() {
    std::string out;
    if (!read_reply(&out)) return eof_ ? "<eof>" : "<error: " + error_ + ">";
    return out;
  }

  // True when the server closed the connection (reads end of stream or reset) within 5 s.
  bool closed_by_peer() {
    s_.set_read_deadline(std::chrono::steady_clock::now() + 5s);
    while (fill()) buf_.clear();
    return eof_ || error_.find("reset") != std::string::npos ||
           error_.find("Connection reset") != std::string::npos;
  }

  weft::net::TcpStream& stream() { return s_; }

 private:
  bool fill() {
    const std::size_t have = buf_.size();
    buf_.resize(have + 65536);  // on the heap: fiber stacks are small
    absl::StatusOr<std::size_t> n = s_.read(buf_.data() + have, 65536);
    buf_.resize(have + (n.ok() ? *n : 0));
    if (!n.ok()) {
      error_ = std::string(n.status().message());
      return false;
    }
    if (*n == 0) {
      eof_ = true;
      return false;
    }
    return true;
  }
  bool read_line(std::string* line) {
    for (;;) {
      const std::size_t eol = buf_.find("\r\n");
      if (eol != std::string::npos) {
        *line = buf_.substr(0, eol + 2);
        buf_.erase(0, eol + 2);
        return true;
      }
      if (!fill()) return false;
    }
  }
  bool read_reply(std::string* out) {
    std::string line;
    if (!read_line(&line)) return false;
    out->append(line);
    if (line[0] == '$') {
      const long len = std::stol(line.substr(1));
      if (len < 0) return true;
      while (buf_.size() < static_cast<std::size_t>(len) + 2) {
        if (!fill()) return false;
      }
      out->append(buf_, 0, len + 2);
      buf_.erase(0, len + 2);
    } else if (line[0] == '*') {
      const long n = std::stol(line.substr(1));
      for (long i = 0; i < n; ++i) {
        if (!read_reply(out)) return false;
      }
    }
    return true;
  }

  weft::net::TcpStream s_;
  std::string buf_;
  bool eof_ = false;
  std::string error_;
};

// Clients a test leaves open on purpose across the stop; closed after it.
std::vector<Client> g_left_open;

// Runs `body(addr, store)` against a server on 127.0.0.1:0, then stops the server and checks
// that it returns.
template <class Body>
void with_server(Body body, resp::ServerOptions opts = {}) {
  weft::run(
      [&] {
        absl::StatusOr<weft::net::TcpListener> l = weft::net::listen_tcp("127.0.0.1:0");
        ASSERT_TRUE(l.ok()) << l.status();
        const std::string addr = l->local_addr();
        resp::Store store;
        weft::Chan<int> stop(1);
        weft::Task<void> server = weft::spawn(
            [&, l = std::move(*l)]() mutable { resp::serve(std::move(l), stop, store, opts); });
        body(addr, store);
        stop.close();
        // serve() must return promptly even with connections left open by the body.
        const bool returned = weft_test::join_within(server, 10s);
        EXPECT_TRUE(returned) << "serve() did not return within 10 s of stop";
        g_left_open.clear();
        if (!returned) std::abort();  // a fiber still uses this frame
      },
      two_workers());
}

TEST(RespServer, CommandsOverTheWire) {
  with_server([](const std::string& addr, resp::Store&) {
    Client c = Client::dial(addr);
    EXPECT_EQ(c.call({"PING"}), "+PONG\r\n");
    EXPECT_EQ(c.call({"SET", "k", "v"}), "+OK\r\n");
    EXPECT_EQ(c.call({"GET", "k"}), "$1\r\nv\r\n");
    // Inline, as from nc.
    ASSERT_TRUE(c.send("get k\r\nEXISTS k nope\n"));
    EXPECT_EQ(c.reply(), "$1\r\nv\r\n");
    EXPECT_EQ(c.reply(), ":1\r\n");
    EXPECT_EQ(c.call({"QUIT"}), "+OK\r\n");
    EXPECT_TRUE(c.closed_by_peer());
  });
}

TEST(RespServer, PipelinedRepliesInOrder) {
  with_server([](const std::string& addr, resp::Store&) {
    Client c = Client::dial(addr);
    std::string batch;
    constexpr int kN = 5000;
    for (int i = 0; i < kN; ++i) {
      batch += Client::command({"SET", "k" + std::to_string(i), std::to_string(i)});
      batch += Client::command({"INCR", "k" + std::to_string(i)});
    }
    ASSERT_TRUE(c.send(batch));
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(c.reply(), "+OK\r\n") << i;
      ASSERT_EQ(c.reply(), ":" + std::to_string(i + 1) + "\r\n") << i;
    }
    // Commands split at every byte boundary still parse.
    const std::string cmd = Client::command({"GET", "k7"});
    for (char ch : cmd) ASSERT_TRUE(c.send(std::string_view(&ch, 1)));
    EXPECT_EQ(c.reply(), "$1\r\n8\r\n");
  });
}

TEST(RespServer, BigValues) {
  with_server([](const std::string& addr, resp::Store&) {
    Client c = Client::dial(addr);
    std::string big(8 << 20, 'x');
    for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i % 26);
    EXPECT_EQ(c.call({"SET", "big", big}), "+OK\r\n");
    EXPECT_EQ(c.call({"GET", "big"}), "$" + std::to_string(big.size()) + "\r\n" + big + "\r\n");
  });
}

// Sends `bytes`, then expects "-ERR Protocol error: <what>" and the connection closed.
void expect_protocol_error(const std::string& addr, const std::string& bytes,
                           const std::string& what) {
  Client c = Client::dial(addr);
  ASSERT_TRUE(c.send(bytes));
  EXPECT_EQ(c.reply(), "-ERR Protocol error: " + what + "\r\n") << testing::PrintToString(bytes);
  EXPECT_TRUE(c.closed_by_peer()) << testing::PrintToString(bytes);
}

TEST(RespServer, MalformedInputGetsAnErrorAndAClose) {
  resp::ServerOptions opts;
  opts.limits.max_bulk_len = 1 << 20;
  with_server(
      [](const std::string& addr, resp::Store&) {
        expect_protocol_error(addr, "*1\r\n$99999999\r\n", "invalid bulk length");
        expect_protocol_error(addr, "*1\r\n$-7\r\nabc\r\n", "invalid bulk length");
        expect_protocol_error(addr, "*1\r\n$1x\r\n", "invalid bulk length");
        expect_protocol_error(addr, "*-x\r\n", "invalid multibulk length");
        expect_protocol_error(addr, "*99999999999\r\n", "invalid multibulk length");
        expect_protocol_error(addr, "*2\r\n+PING\r\n", "expected '$', got '+'");
        expect_protocol_error(addr, "*1\r\n$4\r\nPINGPONG\r\n",
                              "expected CRLF after a bulk string of length 4");
        expect_protocol_error(addr, std::string(100 << 10, 'a'), "too big inline request");
        expect_protocol_error(addr, "*" + std::string(100 << 10, '1'),
                              "too big mbulk count string");
        expect_protocol_error(addr, "SET k \"open\r\n", "unbalanced quotes in request");
        // Replies to the good commands before the bad one still arrive, in order.
        Client c = Client::dial(addr);
        ASSERT_TRUE(c.send(Client::command({"PING"}) + "*1\r\n$-2\r\n"));
        EXPECT_EQ(c.reply(), "+PONG\r\n");
        EXPECT_EQ(c.reply(), "-ERR Protocol error: invalid bulk length\r\n");
        EXPECT_TRUE(c.closed_by_peer());
      },
      opts);
}

TEST(RespServer, TruncatedCommandsThenCloseLeaveTheServerServing) {
  with_server([](const std::string& addr, resp::Store&) {
    const std::string full = Client::command({"SET", "key", std::string(1000, 'v')});
    for (std::size_t cut : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{10},
                            std::size_t{15}, std::size_t{500}, full.size() - 1}) {
      Client c = Client::dial(addr);
      ASSERT_TRUE(c.send(full.substr(0, cut)));
      c.stream().close();  // abrupt
    }
    // A client that declares a 1 MiB bulk, sends part of it and vanishes.
    {
      Client c = Client::dial(addr);
      ASSERT_TRUE(c.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n" + std::string(1000, 'x')));
    }
    Client good = Client::dial(addr);
    EXPECT_EQ(good.call({"SET", "key", "v"}), "+OK\r\n");
    EXPECT_EQ(good.call({"GET", "key"}), "$1\r\nv\r\n");
    EXPECT_EQ(good.call({"EXISTS", "k"}), ":0\r\n");
  });
}

TEST(RespServer, GarbageFromManyClientsWhileAGoodClientIsServed) {
  with_server([](const std::string& addr, resp::Store&) {
    constexpr int kGarbageClients = 40;
    std::atomic<bool> done{false};
    std::atomic<int> garbage_conns{0};
    weft::WaitGroup wg;
    for (int g = 0; g < kGarbageClients; ++g) {
      wg.add(1);
      weft::go([&, g] {
        std::mt19937 rng(g);
        for (int n = 0; n < 25 && !done.load(); ++n) {
          absl::StatusOr<weft::net::TcpStream> s = weft::net::dial_tcp(addr, 5s);
          if (!s.ok()) continue;
          garbage_conns.fetch_add(1);
          s->set_deadline(std::chrono::steady_clock::now() + 300ms);
          std::string junk(1 + rng() % 3000, '\0');
          for (char& ch : junk) ch = static_cast<char>(rng());
          switch (g % 4) {
            case 0:
              junk[0] = '*';  // multibulk garbage
              break;
            case 1:
              junk = "*3\r\n$3\r\nSET\r\n$" + std::to_string(rng()) + "\r\n" + junk;
              break;
            case 2:
              break;  // inline garbage: may parse as unknown commands
            case 3:
              junk = "*" + std::to_string(static_cast<std::int32_t>(rng())) + "\r\n$" + junk;
              break;
          }
          (void)s->write_all(junk);
          if (rng() % 2) {
            char buf[4096];
            (void)s->read(buf, sizeof buf);  // maybe read the error, maybe not
          }
        }
        wg.done();
      });
    }
    // At least `min_rounds`, and on until the garbage clients have connected more than once
    // each on average: how many connect while the good client works is up to the scheduler (on
    // a loaded machine the good client may finish its rounds first), so it keeps working until
    // they have, within a generous bound.
    const int min_rounds = static_cast<int>(weft_test::scaled(2000, 4));
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    int rounds = 0;
    // A lambda, so a failed ASSERT still reaches the join below (the garbage fibers use this
    // frame).
    [&] {
      Client good = Client::dial(addr);
      for (int& i = rounds; i < min_rounds || (garbage_conns.load() <= kGarbageClients &&
                                               std::chrono::steady_clock::now() < give_up);
           ++i) {
        const std::string k = "good:" + std::to_string(i % 17);
        ASSERT_EQ(good.call({"SET", k, std::to_string(i)}), "+OK\r\n");
        ASSERT_EQ(good.call({"GET", k}), "$" + std::to_string(std::to_string(i).size()) + "\r\n" +
                                             std::to_string(i) + "\r\n");
        ASSERT_EQ(good.call({"INCR", "good:counter"}), ":" + std::to_string(i + 1) + "\r\n");
      }
    }();
    done.store(true);
    wg.wait();
    EXPECT_GT(garbage_conns.load(), kGarbageClients);
    // Still serving new clients.
    Client late = Client::dial(addr);
    EXPECT_EQ(late.call({"GET", "good:counter"}),
              "$" + std::to_string(std::to_string(rounds).size()) + "\r\n" +
                  std::to_string(rounds) + "\r\n");
  });
}

TEST(RespServer, AClientThatDoesNotReadDoesNotStallOthers) {
  with_server([](const std::string& addr, resp::Store&) {
    Client setup = Client::dial(addr);
    ASSERT_EQ(setup.call({"SET", "v", std::string(64 << 10, 'x')}), "+OK\r\n");
    // Pipelines 64 MiB of replies and reads none of them.
    Client hog = Client::dial(addr);
    std::string batch;
    for (int i = 0; i < 1024; ++i) batch += Client::command({"GET", "v"});
    ASSERT_TRUE(hog.send(batch));  // 25 KiB: fits the socket buffers
    weft::this_fiber::sleep_for(100ms);
    Client other = Client::dial(addr);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(other.call({"PING"}), "+PONG\r\n");
  });
}

TEST(RespServer, ExpiredKeysAreSweptActively) {
  resp::ServerOptions opts;
  opts.sweep_every = 10ms;
  with_server(
      [](const std::string& addr, resp::Store& store) {
        Client c = Client::dial(addr);
        for (int i = 0; i < 200; ++i) {
          ASSERT_EQ(c.call({"SET", "t" + std::to_string(i), "v", "PX", "20"}), "+OK\r\n");
        }
        ASSERT_EQ(c.call({"SET", "stay", "v"}), "+OK\r\n");
        // Nobody touches the keys again: only the sweeper can remove them.
        EXPECT_TRUE(weft_test::eventually([&] { return store.size() == 1; }, 5s))
            << store.size() << " keys left";
        EXPECT_EQ(c.call({"DBSIZE"}), ":1\r\n");
      },
      opts);
}

TEST(RespServer, StopEndsIdleAndHalfSentConnections) {
  with_server([](const std::string& addr, resp::Store&) {
    for (int i = 0; i < 20; ++i) {
      g_left_open.push_back(Client::dial(addr));
      if (i % 2) {
        ASSERT_TRUE(g_left_open.back().send("*2\r\n$3\r\nGET\r\n$100\r\nabc"));
      }
    }
    EXPECT_EQ(g_left_open[0].call({"PING"}), "+PONG\r\n");
  });
}

}  // namespace
