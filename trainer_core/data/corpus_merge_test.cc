// trellis-corpus merge's library part: several corpora written as one.
#include "trainer_core/data/corpus_merge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/synthetic.h"
#include "trainer_core/error.h"
#include "trainer_core/file_test_util.h"

namespace trellis::train {
namespace {

namespace fs = std::filesystem;

class CorpusMergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trellis-corpus-merge-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Written(const std::string& name, const Corpus& c) {
    const std::string path = (dir_ / name).string();
    WriteCorpus(path, c);
    return path;
  }
  fs::path dir_;
};

// The concatenation of `parts` (ids and boundaries), built in memory: what
// the merged file must hold.
Corpus Concatenated(const std::vector<Corpus>& parts, uint32_t vocab) {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> starts;
  for (const Corpus& c : parts) {
    for (uint64_t s : c.doc_starts) starts.push_back(ids.size() + s);
    const std::vector<uint32_t> more = c.tokens.ToVector();
    ids.insert(ids.end(), more.begin(), more.end());
  }
  if (vocab > kCorpusMaxNarrowVocab) return OwnedWideCorpus(vocab, ids, starts);
  return OwnedCorpus(vocab, std::vector<uint16_t>(ids.begin(), ids.end()), starts);
}

// Random sizes, across the writer's pieces and chunks: the merged file is
// the inputs one after another, the same file as writing the concatenation
// (so the same checksum), read back through every check.
TEST_F(CorpusMergeTest, DocumentsFollowEachOtherInTheOrderGiven) {
  std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed());
  for (int trial = 0; trial < 3; ++trial) {
    const auto tokens = [&] { return 2 + static_cast<int64_t>(rng() % 700000); };
    const Corpus a = SyntheticCorpus(500, tokens(), rng(), 2 + rng() % 5000);
    const Corpus b = SyntheticCorpus(32000, tokens(), rng(), 2 + rng() % 90000);
    const std::string pa = Written("a.corpus", a), pb = Written("b.corpus", b);
    const std::string out = (dir_ / "ab.corpus").string();
    const MergedCorpus m = MergeCorpora({pa, pb, pa}, out);  // a twice: weighted up
    const Corpus merged = ReadCorpus(out);
    const Corpus want = Concatenated({a, b, a}, 32000);
    EXPECT_EQ(merged.vocab, 32000u);
    EXPECT_EQ(merged.tokens.width(), 2);
    EXPECT_EQ(merged.tokens.ToVector(), want.tokens.ToVector()) << "trial " << trial;
    EXPECT_EQ(merged.doc_starts.ToVector(), want.doc_starts.ToVector()) << "trial " << trial;
    EXPECT_EQ(merged.checksum, want.checksum);
    EXPECT_EQ(m.checksum, merged.checksum);
    EXPECT_EQ(m.tokens, merged.tokens.size());
    EXPECT_EQ(m.documents, merged.doc_starts.size());
    ASSERT_EQ(m.sources.size(), 3u);
    EXPECT_EQ(m.sources[1].path, pb);
    EXPECT_EQ(m.sources[1].tokens, b.tokens.size());
    EXPECT_EQ(m.sources[1].vocab, 32000u);
  }
}

// A source of a vocab over 65536 widens the others' ids to u32.
TEST_F(CorpusMergeTest, AWideSourceWidensTheNarrowOnes) {
  const Corpus narrow = SyntheticCorpus(300, 5000, 1, 700);
  const Corpus wide = SyntheticCorpus(150000, 9000, 2, 1000);
  const std::string out = (dir_ / "m.corpus").string();
  MergeCorpora({Written("n.corpus", narrow), Written("w.corpus", wide)}, out);
  const Corpus merged = ReadCorpus(out);
  EXPECT_EQ(merged.vocab, 150000u);
  EXPECT_EQ(merged.tokens.width(), 4);
  EXPECT_EQ(merged.tokens.ToVector(), Concatenated({narrow, wide}, 150000).tokens.ToVector());
}

// A corrupt input is named and nothing is written; the output may be an input
// (it is replaced only once the merge is whole).
TEST_F(CorpusMergeTest, ACorruptInputIsNamedAndTheOutputMayBeAnInput) {
  const Corpus a = SyntheticCorpus(1000, 4000, 3, 500);
  const std::string pa = Written("a.corpus", a), pb = Written("b.corpus", a);
  testing::FlipByte(pb, 3);
  const std::string out = (dir_ / "out.corpus").string();
  try {
    MergeCorpora({pa, pb}, out);
    ADD_FAILURE() << "merged a corrupt corpus";
  } catch (const TrainError& e) {
    EXPECT_NE(std::string(e.what()).find(pb), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  EXPECT_THROW(MergeCorpora({}, out), RefusedInput);

  MergeCorpora({pa, pa}, pa);
  EXPECT_EQ(ReadCorpus(pa).tokens.ToVector(), Concatenated({a, a}, 1000).tokens.ToVector());
}

}  // namespace
}  // namespace trellis::train
