#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "trainer_core/data/synthetic.h"
#include "trainer_core/error.h"
#include "trainer_core/export/safetensors.h"

namespace trellis::train {
namespace {

std::string TempPath(const char* name) {
  return "/tmp/export_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(SafetensorsTest, HeaderAndDataFollowTheFormat) {
  const std::string path = TempPath("a.safetensors");
  std::vector<float> a{1.5f, -2.f, 3.f, 4.f, 5.f, 6.f};
  std::vector<int32_t> b{7, -1, 9};
  {
    SafetensorsWriter w(path, {{"a", StDtype::kF32, {2, 3}}, {"b", StDtype::kI32, {3}}},
                        {{"format", "pt"}});
    w.Write(a.data(), 24);
    w.Write(b.data(), 12);
    w.Finish();
  }
  auto bytes = ReadAll(path);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u);
  auto header = nlohmann::json::parse(std::string(bytes.data() + 8, len));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json::array({0, 24}));
  EXPECT_EQ(header["b"]["dtype"], "I32");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({24, 36}));
  ASSERT_EQ(bytes.size(), 8 + len + 36);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + len, a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + len + 24, b.data(), 12), 0);
  std::remove(path.c_str());
}

TEST(SafetensorsTest, WrongSizesDuplicatesAndMissingTensorsAreErrors) {
  const std::string path = TempPath("b.safetensors");
  EXPECT_THROW(SafetensorsWriter(path, {{"x", StDtype::kF32, {1}}, {"x", StDtype::kF32, {1}}}, {}),
               TrainError);
  {
    SafetensorsWriter w(path, {{"x", StDtype::kF32, {2}}}, {});
    float v[3] = {};
    EXPECT_THROW(w.Write(v, 12), TrainError);
    EXPECT_THROW(w.Finish(), TrainError);
  }
  // An unfinished file never appears under its name.
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

// An export cut short (an error, a crash before Finish) leaves the previous
// file whole under the name, and no temporary file beside it.
TEST(SafetensorsTest, AnUnfinishedExportLeavesThePreviousFileAndNoTemporaryFile) {
  const std::string path = TempPath("c.safetensors");
  std::vector<float> a{1.f, 2.f};
  auto write = [&](bool finish) {
    SafetensorsWriter w(path, {{"a", StDtype::kF32, {2}}, {"b", StDtype::kF32, {2}}}, {});
    w.Write(a.data(), 8);
    if (!finish) return;
    w.Write(a.data(), 8);
    w.Finish();
  };
  write(true);
  const std::vector<char> previous = ReadAll(path);
  a[0] = 5.f;
  write(false);
  EXPECT_EQ(ReadAll(path), previous);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  write(true);
  EXPECT_NE(ReadAll(path), previous);
  EXPECT_EQ(ReadAll(path).size(), previous.size());
  std::remove(path.c_str());
}

TEST(SafetensorsTest, AFileThatCannotBeCreatedIsNamedWithTheReason) {
  const std::string path = TempPath("no-such-dir") + "/d.safetensors";
  try {
    SafetensorsWriter w(path, {{"a", StDtype::kF32, {2}}}, {});
    ADD_FAILURE() << "no error";
  } catch (const TrainError& e) {
    EXPECT_EQ(std::string(e.what()), path + ".tmp: cannot create: No such file or directory");
  }
}

TEST(SyntheticCorpusTest, SeededSkewedAndLearnable) {
  const Corpus a = SyntheticCorpus(1000, 200000, 7);
  EXPECT_EQ(a.tokens.ToVector(), SyntheticCorpus(1000, 200000, 7).tokens.ToVector());
  EXPECT_NE(a.tokens.ToVector(), SyntheticCorpus(1000, 200000, 8).tokens.ToVector());
  EXPECT_EQ(a.doc_starts.ToVector(), std::vector<uint64_t>{0});
  std::map<int, int64_t> unigram;
  std::map<std::pair<int, int>, int64_t> bigram;
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    ASSERT_LT(a.tokens[i], 1000);
    ++unigram[a.tokens[i]];
    if (i > 0) ++bigram[{a.tokens[i - 1], a.tokens[i]}];
  }
  EXPECT_GT(unigram[0], unigram[500] * 20);  // skewed towards small ids
  // Conditional entropy well under the unigram entropy: there is structure to learn.
  const double n = static_cast<double>(a.tokens.size());
  double h1 = 0, h2 = 0;
  for (auto& [t, c] : unigram) h1 -= c / n * std::log(c / n);
  for (auto& [tt, c] : bigram) h2 -= c / n * std::log(c / static_cast<double>(unigram[tt.first]));
  EXPECT_LT(h2, h1 - 1.0) << "unigram " << h1 << " nats, bigram " << h2;
}

}  // namespace
}  // namespace trellis::train
