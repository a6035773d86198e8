// A Tour of Go: Exercise: Web Crawler -- https://go.dev/tour/concurrency/10
//
// The exercise: crawl in parallel without fetching the same URL twice. Each URL is fetched in
// its own fiber; a set behind a weft::Mutex records the URLs already claimed, and a WaitGroup
// tells when the last fetch is done. The Tour's fakeFetcher stands in for the network, each
// fetch taking 10 ms.
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>
#include <weft/weft.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

using namespace std::chrono_literals;

struct Page {
  std::string body;
  std::vector<std::string> urls;
};

class Fetcher {
 public:
  virtual ~Fetcher() = default;
  // fetch returns the body of the URL and the URLs found on that page.
  virtual absl::StatusOr<Page> fetch(const std::string& url) const = 0;
};

// FakeFetcher is a Fetcher that returns canned results.
class FakeFetcher : public Fetcher {
 public:
  explicit FakeFetcher(std::map<std::string, Page> pages) : pages_(std::move(pages)) {}
  absl::StatusOr<Page> fetch(const std::string& url) const override {
    weft::this_fiber::sleep_for(10ms);  // a network round trip
    auto it = pages_.find(url);
    if (it == pages_.end()) return absl::NotFoundError("not found: " + url);
    return it->second;
  }

 private:
  std::map<std::string, Page> pages_;
};

// fetcher is a populated FakeFetcher.
const FakeFetcher fetcher({
    {"https://golang.org/",
     {"The Go Programming Language", {"https://golang.org/pkg/", "https://golang.org/cmd/"}}},
    {"https://golang.org/pkg/",
     {"Packages",
      {"https://golang.org/", "https://golang.org/cmd/", "https://golang.org/pkg/fmt/",
       "https://golang.org/pkg/os/"}}},
    {"https://golang.org/pkg/fmt/",
     {"Package fmt", {"https://golang.org/", "https://golang.org/pkg/"}}},
    {"https://golang.org/pkg/os/",
     {"Package os", {"https://golang.org/", "https://golang.org/pkg/"}}},
});

class Crawler {
 public:
  explicit Crawler(const Fetcher& fetcher) : fetcher_(fetcher) {}

  // crawl uses the fetcher to crawl pages starting with url, to a maximum of depth, and returns
  // once every page reached has been fetched.
  void crawl(const std::string& url, int depth) {
    start(url, depth);
    pending_.wait();
  }

 private:
  void start(const std::string& url, int depth) {
    pending_.add(1);
    weft::go([this, url, depth] {
      visit(url, depth);
      pending_.done();
    });
  }

  void visit(const std::string& url, int depth) {
    if (depth <= 0) return;
    {
      std::lock_guard lock(mu_);
      if (!fetched_.insert(url).second) return;  // someone else fetches this one
    }
    absl::StatusOr<Page> page = fetcher_.fetch(url);
    if (!page.ok()) {
      std::printf("%s\n", std::string(page.status().message()).c_str());
      return;
    }
    std::printf("found: %s \"%s\"\n", url.c_str(), page->body.c_str());
    for (const std::string& u : page->urls) start(u, depth - 1);
  }

  const Fetcher& fetcher_;
  weft::Mutex mu_;
  std::set<std::string> fetched_;  // guarded by mu_
  weft::WaitGroup pending_;
};

int main() {
  weft::run([] { Crawler(fetcher).crawl("https://golang.org/", 4); });
}
