// Go by Example: Channels -- https://gobyexample.com/channels
//
// weft::Chan<T> is Go's `chan T`: a handle, so copies (like the one the lambda captures) share one
// channel. It is unbuffered by default: a send parks until a receiver takes the value.
#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    // messages := make(chan string)
    weft::Chan<std::string> messages;

    // go func() { messages <- "ping" }()
    weft::go([messages] { messages.send("ping"); });

    // msg := <-messages. recv() returns std::nullopt only once the channel is closed.
    std::optional<std::string> msg = messages.recv();
    std::printf("%s\n", msg->c_str());
  });
}
