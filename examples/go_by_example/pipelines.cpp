// Go Concurrency Patterns: Pipelines and cancellation -- https://go.dev/blog/pipelines
//
// A pipeline is a series of stages connected by channels. gen emits numbers, sq squares them;
// fan-out runs two sq stages reading one channel, fan-in (merge) combines their outputs. Every
// send also selects on `done`: closing done cancels all stages, so none stays parked forever.
// This version counts its stage fibers in a WaitGroup to show that they all return.
#include <cstdio>
#include <memory>
#include <utility>
#include <variant>
#include <vector>
#include <weft/weft.hpp>

// Go's `chan struct{}`: a channel that is only ever closed, to broadcast "stop".
using Done = weft::Chan<std::monostate>;

// The running stage fibers.
weft::WaitGroup stages;

// go, but counted in `stages`.
template <class F>
void stage(F f) {
  stages.add(1);
  weft::go([f = std::move(f)] {
    f();
    stages.done();
  });
}

// Sends v on out unless done is closed first; false if cancelled.
bool send_or_done(const weft::Chan<int>& out, int v, const Done& done) {
  return weft::select(weft::case_send(out, v), weft::case_recv(done)) == 0;
}

// The first stage: emits nums on the returned channel, then closes it.
weft::Chan<int> gen(Done done, std::vector<int> nums) {
  weft::Chan<int> out;
  stage([=] {
    for (int n : nums) {
      if (!send_or_done(out, n, done)) break;
    }
    out.close();
  });
  return out;
}

// Receives integers from in until it is closed, emits their squares.
weft::Chan<int> sq(Done done, weft::Chan<int> in) {
  weft::Chan<int> out;
  stage([=] {
    for (int n : in) {
      if (!send_or_done(out, n * n, done)) break;
    }
    out.close();
  });
  return out;
}

// Fan-in: copies the values of every channel in cs onto one channel, closed once all of cs are.
weft::Chan<int> merge(Done done, std::vector<weft::Chan<int>> cs) {
  weft::Chan<int> out;
  auto wg = std::make_shared<weft::WaitGroup>();
  wg->add(static_cast<std::int64_t>(cs.size()));
  // Start an output fiber for each input channel in cs: it copies values from c to out until c
  // or done is closed, then calls wg->done().
  for (const weft::Chan<int>& c : cs) {
    stage([=] {
      for (int n : c) {
        if (!send_or_done(out, n, done)) break;
      }
      wg->done();
    });
  }
  // Close out once all the output fibers are done.
  stage([=] {
    wg->wait();
    out.close();
  });
  return out;
}

int main() {
  weft::run([] {
    {
      // Fan-out, fan-in: distribute the sq work across two fibers that both read from in, and
      // consume the merged output. Which square comes first varies.
      Done done;
      weft::Chan<int> in = gen(done, {2, 3});
      weft::Chan<int> c1 = sq(done, in);
      weft::Chan<int> c2 = sq(done, in);
      for (int n : merge(done, {c1, c2})) std::printf("%d\n", n);  // 4 then 9, or 9 then 4
      done.close();
    }
    {
      // Explicit cancellation: consume only the first value, then close done. Every stage still
      // blocked on a send sees done closed and returns.
      Done done;
      weft::Chan<int> in = gen(done, {2, 3});
      weft::Chan<int> c1 = sq(done, in);
      weft::Chan<int> c2 = sq(done, in);
      weft::Chan<int> out = merge(done, {c1, c2});
      std::printf("first: %d\n", *out.recv());  // 4 or 9
      done.close();
    }
    stages.wait();
    std::printf("every stage has returned\n");
  });
}
