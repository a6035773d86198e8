// Go by Example: Channel Buffering -- https://gobyexample.com/channel-buffering
//
// A buffered channel, `make(chan string, 2)`, is weft::Chan<std::string>(2): up to two sends
// complete without a receiver.
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    weft::Chan<std::string> messages(2);

    // Because the channel is buffered, these sends do not need a concurrent receive.
    messages.send("buffered");
    messages.send("channel");

    // Later the two values are received as usual.
    std::printf("%s\n", messages.recv()->c_str());
    std::printf("%s\n", messages.recv()->c_str());
  });
}
