// Go Concurrency Patterns: Pipelines and cancellation, "Bounded parallelism" --
// https://go.dev/blog/pipelines (bounded.go)
//
// Digest every file of a tree with a fixed number of digester fibers, however many files there
// are. A walker fiber sends the paths; kNumDigesters fibers read and hash them; the results are
// collected and printed sorted by path. The blog hashes a real directory with MD5; to keep the
// output fixed this version reads an in-memory file tree through weft::blocking() (the way to run
// real blocking file I/O off the worker threads) and hashes with FNV-1a.
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <weft/weft.hpp>

using namespace std::chrono_literals;
using Done = weft::Chan<std::monostate>;  // Go's chan struct{}: only ever closed

// The file tree: path -> contents.
std::map<std::string, std::string> make_files() {
  std::map<std::string, std::string> files;
  for (int i = 1; i <= 12; ++i) {
    const std::string dir = i % 3 == 0 ? "root/docs/" : "root/src/";
    files[dir + "file" + std::to_string(i) + ".txt"] =
        "contents of file " + std::to_string(i) + std::string(static_cast<std::size_t>(i), '!');
  }
  return files;
}
const std::map<std::string, std::string> kFiles = make_files();

std::uint64_t fnv1a(std::string_view data) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

// walk_files emits the path of each regular file in the tree, and stops early if done is closed.
weft::Chan<std::string> walk_files(Done done) {
  weft::Chan<std::string> paths;
  weft::go([paths, done] {
    for (const auto& [path, contents] : kFiles) {
      if (weft::select(weft::case_send(paths, path), weft::case_recv(done)) == 1) break;
    }
    paths.close();
  });
  return paths;
}

// A result is the product of reading and summing a file.
struct Result {
  std::string path;
  std::uint64_t sum;
};

// digester reads path names from paths and sends digests of the corresponding files on c until
// either paths or done is closed.
void digester(Done done, weft::Chan<std::string> paths, weft::Chan<Result> c) {
  for (const std::string& path : paths) {
    const std::string data = weft::blocking([&] {
      std::this_thread::sleep_for(2ms);  // a disk read
      return kFiles.at(path);
    });
    if (weft::select(weft::case_send(c, Result{path, fnv1a(data)}), weft::case_recv(done)) == 1) {
      return;
    }
  }
}

// digest_all reads all the files in the tree and returns a map from file path to the digest of
// its contents.
std::map<std::string, std::uint64_t> digest_all() {
  // digest_all closes the done channel when it returns; it may do so before receiving all the
  // values from c.
  Done done;
  weft::Chan<std::string> paths = walk_files(done);

  // Start a fixed number of fibers to read and digest files.
  weft::Chan<Result> c;
  weft::WaitGroup wg;
  constexpr int kNumDigesters = 3;
  wg.add(kNumDigesters);
  for (int i = 0; i < kNumDigesters; ++i) {
    weft::go([&wg, done, paths, c] {
      digester(done, paths, c);
      wg.done();
    });
  }
  weft::go([&wg, c] {
    wg.wait();
    c.close();
  });

  std::map<std::string, std::uint64_t> m;
  for (Result r : c) m[r.path] = r.sum;
  done.close();
  return m;
}

int main() {
  weft::run([] {
    // Calculate the digest of all files in the tree, then print the results sorted by path name.
    for (const auto& [path, sum] : digest_all()) {
      std::printf("%016" PRIx64 "  %s\n", sum, path.c_str());
    }
  });
}
