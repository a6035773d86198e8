// Go by Example: Closing Channels -- https://gobyexample.com/closing-channels
//
// close() says no more values will be sent. Go's two-value receive `j, more := <-jobs` is recv()
// returning std::optional: std::nullopt once the channel is closed and drained.
#include <cstdio>
#include <optional>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    weft::Chan<int> jobs(5);
    weft::Chan<bool> done;

    // The worker fiber repeatedly receives from jobs. When jobs is closed and all its values
    // have been received, it notifies on done.
    weft::go([jobs, done] {
      for (;;) {
        std::optional<int> j = jobs.recv();
        if (j) {
          std::printf("received job %d\n", *j);
        } else {
          std::printf("received all jobs\n");
          done.send(true);
          return;
        }
      }
    });

    // Send 3 jobs to the worker over the jobs channel, then close it.
    for (int j = 1; j <= 3; ++j) {
      jobs.send(j);
      std::printf("sent job %d\n", j);
    }
    jobs.close();
    std::printf("sent all jobs\n");

    // Await the worker using the synchronization approach we saw earlier.
    done.recv();

    // Reading from a closed channel succeeds immediately, returning std::nullopt: Go's zero
    // value with ok == false.
    const bool ok = jobs.recv().has_value();
    std::printf("received more jobs: %s\n", ok ? "true" : "false");
  });
}
