#include "trainer_core/checkpoint/shard_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "trainer_core/checkpoint/xxhash64.h"
#include "trainer_core/error.h"
#include "trainer_core/file_test_util.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

std::string Pattern(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(i % 256);
  return s;
}

// Values of the reference implementation (xxhsum -H1), seed 0, at every tail
// length the algorithm treats apart: none, bytes, 4 + 1 after a 32-byte round,
// 8-byte words.
TEST(Xxh64Test, MatchesTheReferenceImplementation) {
  EXPECT_EQ(Xxh64Of("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(Xxh64Of("a", 1), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(Xxh64Of("abc", 3), 0x44BC2CF5AD770999ull);
  const std::string bytes = Pattern(37);  // 0, 1, ..., 36
  EXPECT_EQ(Xxh64Of(bytes.data(), bytes.size()), 0xD93FA2DFEE5C24C9ull);
  const std::string longer = Pattern(768) + "xyz12";  // 0..255 three times, then text
  EXPECT_EQ(Xxh64Of(longer.data(), longer.size()), 0x9B7D50C047818B1Bull);
}

TEST(Xxh64Test, PiecesOfAnySizeHashAsTheWhole) {
  std::mt19937_64 rng(std::random_device{}());
  std::string bytes(5000, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  for (int trial = 0; trial < 50; ++trial) {
    Xxh64 h;
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(rng() % 100, bytes.size() - at);
      h.Update(bytes.data() + at, n);
      at += n;
    }
    EXPECT_EQ(h.Digest(), Xxh64Of(bytes.data(), bytes.size())) << "trial " << trial;
  }
}

// Expects `f` to throw TrainError with every one of `parts` in its message.
template <typename F>
void ExpectError(F f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const TrainError& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "missing '" << p << "' in: " << e.what();
  }
}

class ShardFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("trellis-shard-test");
    path_ = dir_ + "/s.bin";
  }
  void TearDown() override { RemoveTree(dir_); }

  static std::vector<ShardEntry> Three() {
    return {{"a", DType::kF32, {2, 3}, 0, 24},
            {"empty", DType::kI64, {0}, 0, 0},
            {"b", DType::kBF16, {5000}, 0, 10000}};
  }
  // Three entries (one empty), appended in pieces of 7 bytes across them.
  uint64_t WriteThree() {
    ShardWriter w(path_, Three());
    const std::string all = a_ + b_;
    for (size_t at = 0; at < all.size(); at += 7)
      w.Append(all.data() + at, std::min<size_t>(7, all.size() - at));
    const uint64_t sum = w.Finish();
    EXPECT_EQ(static_cast<int64_t>(w.file_bytes()), FileSize(path_));
    return sum;
  }

  std::string dir_, path_;
  std::string a_ = Pattern(24), b_ = Pattern(10000);
};

TEST_F(ShardFileTest, RoundTripsEntriesAppendedInPieces) {
  const uint64_t index_sum = WriteThree();
  EXPECT_FALSE(PathExists(path_ + ".tmp"));
  ShardReader r(path_);
  EXPECT_EQ(r.version(), kShardVersion);
  EXPECT_EQ(r.index_checksum(), index_sum);
  ASSERT_EQ(r.entries().size(), 3u);
  EXPECT_EQ(r.entries()[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.entries()[2].dtype, DType::kBF16);
  const uint64_t index_read = r.bytes_read();
  EXPECT_EQ(r.ReadBytes(*r.Find("b")), b_);
  EXPECT_EQ(r.bytes_read(), index_read + b_.size());  // only what was asked for
  EXPECT_EQ(r.ReadBytes(*r.Find("a")), a_);
  EXPECT_EQ(r.ReadBytes(*r.Find("empty")), "");
  EXPECT_EQ(r.bytes_read(), r.size());
  EXPECT_EQ(r.Find("absent"), nullptr);
}

// The index holds every entry's checksum: the same names and sizes with
// other bytes give another index checksum (what the manifest records).
TEST_F(ShardFileTest, TheIndexChecksumStandsForTheData) {
  const uint64_t first = WriteThree();
  b_[5000] ^= 1;
  EXPECT_NE(WriteThree(), first);
}

TEST_F(ShardFileTest, AnEntryReadInPiecesIsVerifiedAtTheEnd) {
  WriteThree();
  testing::FlipByte(path_, 1);  // the last byte of "b"
  ShardReader r(path_);
  EXPECT_EQ(r.ReadBytes(*r.Find("a")), a_);  // the other entries read as written
  EntryReader b(r, *r.Find("b"));
  std::string got(b.left(), '\0');
  b.Next(got.data(), 4000);
  b.Next(got.data() + 4000, 6000);
  EXPECT_EQ(b.left(), 0u);
  ExpectError([&] { b.Verify(); }, {path_, "tensor 'b' is corrupt"});
  ExpectError([&] { r.ReadBytes(*r.Find("b")); }, {path_, "tensor 'b' is corrupt"});
  ExpectError([&] { EntryReader(r, *r.Find("a")).Next(got.data(), 25); },
              {"tensor 'a' has 24 bytes left, 25 asked for"});
}

TEST_F(ShardFileTest, ACorruptIndexOrHeaderIsNamed) {
  WriteThree();
  const std::string intact = dir_ + "/intact.bin";
  RenamePath(path_, intact);
  auto corrupt_at = [&](std::streamoff from_end) {
    RemoveTree(path_);
    std::ofstream(path_, std::ios::binary) << std::ifstream(intact, std::ios::binary).rdbuf();
    testing::FlipByte(path_, from_end);
  };
  const std::streamoff size = static_cast<std::streamoff>(FileSize(intact));
  corrupt_at(size - 30);  // inside the index
  ExpectError([&] { ShardReader r(path_); }, {path_, "corrupt index (checksum mismatch)"});
  corrupt_at(size);  // the magic
  ExpectError([&] { ShardReader r(path_); }, {path_, "not a checkpoint shard"});
  corrupt_at(size - 8);  // the version
  ExpectError([&] { ShardReader r(path_); }, {path_, "unsupported version", "reads 1 and 2"});
  ExpectError([&] { ShardReader r(dir_ + "/absent.bin"); }, {"absent.bin", "cannot open"});
}

TEST_F(ShardFileTest, AppendingMoreOrFewerBytesThanDeclaredIsRefused) {
  {
    ShardWriter w(path_, Three());
    w.Append(a_.data(), a_.size());
    ExpectError([&] { w.Finish(); }, {"tensor 'b' got 0 of its 10000 bytes"});
  }
  EXPECT_FALSE(PathExists(path_ + ".tmp"));  // an unfinished shard leaves nothing
  EXPECT_FALSE(PathExists(path_));
  ShardWriter w(path_, {{"a", DType::kF32, {6}, 0, 24}});
  ExpectError([&] { w.Append(b_.data(), 25); }, {"more bytes appended than the entries declare"});
}

// A rank that fails mid-save (or is killed, leaving its .tmp) never spoils
// the shard already there: the new one appears whole at Finish or not at all.
TEST_F(ShardFileTest, AnUnfinishedRewriteLeavesThePreviousShardAndNoTemporaryFile) {
  const uint64_t before = WriteThree();
  std::ofstream(path_ + ".tmp") << "the leftover of a writer that was killed";
  {
    ShardWriter w(path_, Three());
    w.Append(a_.data(), a_.size());
    w.Append(b_.data(), 5000);
    EXPECT_EQ(ShardReader(path_).index_checksum(), before) << "replaced before Finish";
  }  // the save fails here
  EXPECT_FALSE(PathExists(path_ + ".tmp"));
  ShardReader r(path_);
  EXPECT_EQ(r.index_checksum(), before);
  EXPECT_EQ(r.ReadBytes(*r.Find("b")), b_);
  b_[0] ^= 1;
  EXPECT_NE(WriteThree(), before) << "the next save replaces it";
  EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"s.bin"});
}

TEST_F(ShardFileTest, ADirectoryThatCannotTakeTheFileIsNamed) {
  ExpectError([&] { ShardWriter w(dir_ + "/no/such/dir/s.bin", Three()); },
              {"no/such/dir/s.bin.tmp", "cannot create"});
}

}  // namespace
}  // namespace trellis::train
