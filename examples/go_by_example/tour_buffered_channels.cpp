// A Tour of Go: Buffered Channels -- https://go.dev/tour/concurrency/3
//
// Sends to a buffered channel block only when the buffer is full; receives block when it is
// empty. (With a third send before the receives, the lone fiber would block forever: weft
// reports that as Go does, "all fibers are asleep - deadlock!".)
#include <cstdio>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    weft::Chan<int> ch(2);
    ch.send(1);
    ch.send(2);
    std::printf("%d\n", *ch.recv());
    std::printf("%d\n", *ch.recv());
  });
}
