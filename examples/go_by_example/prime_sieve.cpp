// The Go prime sieve -- https://go.dev/doc/play/sieve.go
//
// A concurrent prime sieve: a daisy chain of filter fibers, one per prime found, each passing on
// the numbers its prime does not divide. When main's function returns, weft::run unwinds the
// fibers still parked in the chain.
#include <cstdio>
#include <weft/weft.hpp>

// Send the sequence 2, 3, 4, ... to channel ch.
void generate(weft::Chan<int> ch) {
  for (int i = 2;; ++i) ch.send(i);
}

// Copy the values from channel in to channel out, removing those divisible by prime.
void filter(weft::Chan<int> in, weft::Chan<int> out, int prime) {
  for (;;) {
    const int i = *in.recv();  // Receive value from in.
    if (i % prime != 0) out.send(i);
  }
}

// The prime sieve: daisy-chain filter processes.
int main() {
  weft::run([] {
    weft::Chan<int> ch;      // Create a new channel.
    weft::go(generate, ch);  // Launch generate fiber.
    for (int i = 0; i < 10; ++i) {
      const int prime = *ch.recv();
      std::printf("%d\n", prime);
      weft::Chan<int> ch1;
      weft::go(filter, ch, ch1, prime);
      ch = ch1;
    }
  });
}
