// Go by Example: Worker Pools -- https://gobyexample.com/worker-pools
//
// Several fibers range over one jobs channel; each job goes to exactly one of them. (Go's
// signature says `jobs <-chan int, results chan<- int`; see channel_directions.cpp for how to
// express that in weft.) Sleeps are scaled down 10x from the Go program.
#include <chrono>
#include <cstdio>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// The worker, of which we'll run several concurrent instances. It receives work on the jobs
// channel and sends the corresponding results on results. We sleep 100 ms per job to simulate an
// expensive task.
void worker(int id, weft::Chan<int> jobs, weft::Chan<int> results) {
  for (int j : jobs) {
    std::printf("worker %d started  job %d\n", id, j);
    weft::this_fiber::sleep_for(100ms);
    std::printf("worker %d finished job %d\n", id, j);
    results.send(j * 2);
  }
}

int main() {
  weft::run([] {
    // In order to use our pool of workers we need to send them work and collect their results.
    // We make 2 channels for this.
    constexpr int kNumJobs = 5;
    weft::Chan<int> jobs(kNumJobs);
    weft::Chan<int> results(kNumJobs);

    // This starts up 3 workers, initially blocked because there are no jobs yet.
    for (int w = 1; w <= 3; ++w) weft::go(worker, w, jobs, results);

    // Here we send 5 jobs and then close that channel to indicate that's all the work we have.
    for (int j = 1; j <= kNumJobs; ++j) jobs.send(j);
    jobs.close();

    // Finally we collect all the results of the work. This also ensures that the worker fibers
    // have finished. The 5 jobs take about 200 ms, not 500 ms: 3 workers run concurrently.
    for (int a = 1; a <= kNumJobs; ++a) results.recv();
  });
}
