// Go by Example: Channel Directions -- https://gobyexample.com/channel-directions
//
// In Go a channel parameter can be restricted to one direction: `chan<- string` may only be sent
// to, `<-chan string` only received from, and a `chan string` converts to either implicitly.
// weft has the same two views: weft::SendChan<T> (send, try_send, close) and weft::RecvChan<T>
// (recv, try_recv, range-for), both implicit from weft::Chan<T>, both usable in select.
#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

// This ping function only accepts a channel for sending values. It would be a compile-time error
// to try to receive on this channel: SendChan has no recv().
void ping(weft::SendChan<std::string> pings, const std::string& msg) { pings.send(msg); }

// The pong function accepts one channel for receives (pings) and a second for sends (pongs).
void pong(weft::RecvChan<std::string> pings, weft::SendChan<std::string> pongs) {
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
