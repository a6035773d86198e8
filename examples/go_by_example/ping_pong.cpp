// Ping-pong, from Sameer Ajmani's "Advanced Go Concurrency Patterns" --
// https://go.dev/talks/2013/advconc.slide#6
//
// Two players pass a ball over one unbuffered channel; whoever receives it hits it and sends it
// back. The ball is a std::unique_ptr: channels move values, so a move-only ball works, and only
// its holder can touch it. Sleeps are scaled down 5x from the talk.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

struct Ball {
  int hits = 0;
};

void player(const std::string& name, weft::Chan<std::unique_ptr<Ball>> table) {
  for (;;) {
    std::unique_ptr<Ball> ball = *table.recv();
    ball->hits++;
    std::printf("%s %d\n", name.c_str(), ball->hits);
    weft::this_fiber::sleep_for(20ms);
    table.send(std::move(ball));
  }
}

int main() {
  weft::run([] {
    weft::Chan<std::unique_ptr<Ball>> table;
    weft::go(player, "ping", table);
    weft::go(player, "pong", table);

    table.send(std::make_unique<Ball>());  // game on; toss the ball
    weft::this_fiber::sleep_for(200ms);
    table.recv();  // game over; grab the ball
  });
}
