// Go by Example: Range over Channels -- https://gobyexample.com/range-over-channels
//
// `for elem := range queue` is `for (std::string elem : queue)`: it receives until the channel
// is closed and drained.
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    // We'll iterate over 2 values in the queue channel.
    weft::Chan<std::string> queue(2);
    queue.send("one");
    queue.send("two");
    queue.close();

    // Because we closed the channel above, the iteration terminates after receiving the 2
    // elements. A closed channel with values still buffered can be drained.
    for (std::string elem : queue) std::printf("%s\n", elem.c_str());
  });
}
