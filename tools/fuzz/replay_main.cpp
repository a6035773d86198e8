// A main() for the fuzz targets where libFuzzer is not available (GCC builds): runs
// LLVMFuzzerTestOneInput once on every file named on the command line or found in a directory
// named there -- the seed corpora, or a crash file to reproduce. No fuzzing, just replay.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    return 1;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s FILE_OR_DIR...  (replays inputs; build with clang for fuzzing)\n",
                 argv[0]);
    return 2;
  }
  std::size_t n = 0;
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        rc |= run_file(f);
        ++n;
      }
    } else {
      rc |= run_file(arg);
      ++n;
    }
  }
  std::printf("replayed %zu inputs\n", n);
  return rc;
}
