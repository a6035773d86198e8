// Go by Example: Channel Synchronization -- https://gobyexample.com/channel-synchronization
//
// A blocking receive waits for a fiber to finish. (To wait for several, use a WaitGroup: see
// waitgroups.cpp.) Sleeps are scaled down 10x from the Go program.
#include <chrono>
#include <cstdio>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// The done channel notifies another fiber that this function's work is done.
void worker(weft::Chan<bool> done) {
  std::printf("working...");
  weft::this_fiber::sleep_for(100ms);
  std::printf("done\n");

  done.send(true);  // done <- true
}

int main() {
  weft::run([] {
    // Start a worker fiber, giving it the channel to notify on.
    weft::Chan<bool> done(1);
    weft::go(worker, done);

    // Block until we receive a notification from the worker on the channel.
    done.recv();
  });
}
