// Replays every kept fuzz input through the same entry points the fuzzers ran
// (fuzz/check.h): the minimized corpus under fuzz/corpus/<target>/ and every
// crash ever found under fuzz/crashes/<target>/. A broken invariant aborts, and
// the message names the input.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "fuzz/check.h"

namespace trellis::fuzz {

// Names the target in test names ("... # GetParam() = run_spec").
void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> Inputs(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

size_t Replay(const Target& target, const std::vector<fs::path>& files) {
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = file.string();
    SetCurrentInput(name.c_str());
    target.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  SetCurrentInput(nullptr);
  return files.size();
}

class FuzzReplay : public testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, CorpusAndCrashes) {
  const fs::path root(TRELLIS_FUZZ_DIR);
  const Target& t = GetParam();
  const auto corpus = Inputs(root / "corpus" / t.name);
  // An empty corpus would make this test pass without running anything.
  ASSERT_FALSE(corpus.empty()) << "no inputs under " << (root / "corpus" / t.name);
  const size_t n = Replay(t, corpus) + Replay(t, Inputs(root / "crashes" / t.name));
  RecordProperty("inputs", static_cast<int>(n));
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, testing::ValuesIn(kTargets),
                         [](const testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace trellis::fuzz
