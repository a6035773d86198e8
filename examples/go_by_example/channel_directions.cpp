// Go by Example: Channel Directions -- https://gobyexample.com/channel-directions
//
// In Go a channel parameter can be restricted to one direction: `chan<- string` may only be sent
// to, `<-chan string` only received from, and a `chan string` converts to either implicitly.
// weft::Chan<T> is always bidirectional, so this example defines the two views itself: thin
// handles that share the channel but expose only one side. Passing SendOnly<T> says, and the
// compiler checks, that the callee only sends. (Without them, the convention is to pass a
// `const weft::Chan<T>&` and name it by its role.)
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <weft/weft.hpp>

// Go's `chan<- T`: send and close only.
template <class T>
class SendOnly {
 public:
  SendOnly(weft::Chan<T> ch) : ch_(std::move(ch)) {}  // implicit, like Go's conversion
  void send(T v) const { ch_.send(std::move(v)); }
  void close() const { ch_.close(); }

 private:
  weft::Chan<T> ch_;
};

// Go's `<-chan T`: receive (and range) only.
template <class T>
class RecvOnly {
 public:
  RecvOnly(weft::Chan<T> ch) : ch_(std::move(ch)) {}
  std::optional<T> recv() const { return ch_.recv(); }
  auto begin() const { return ch_.begin(); }
  auto end() const { return ch_.end(); }

 private:
  weft::Chan<T> ch_;
};

// This ping function only accepts a channel for sending values. It would be a compile-time error
// to try to receive on this channel: SendOnly has no recv().
void ping(SendOnly<std::string> pings, const std::string& msg) { pings.send(msg); }

// The pong function accepts one channel for receives (pings) and a second for sends (pongs).
void pong(RecvOnly<std::string> pings, SendOnly<std::string> pongs) {
  std::optional<std::string> msg = pings.recv();
  pongs.send(*msg);
}

int main() {
  weft::run([] {
    weft::Chan<std::string> pings(1);
    weft::Chan<std::string> pongs(1);
    ping(pings, "passed message");
    pong(pings, pongs);
    std::printf("%s\n", pongs.recv()->c_str());
  });
}
