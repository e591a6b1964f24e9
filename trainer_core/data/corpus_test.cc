#include "trainer_core/data/corpus.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "trainer_core/data/batches.h"
#include "trainer_core/data/corpus_chunks.h"
#include "trainer_core/data/corpus_v1_test_util.h"
#include "trainer_core/data/synthetic.h"
#include "trainer_core/error.h"
#include "trainer_core/file_test_util.h"

namespace trellis::train {
namespace {

namespace fs = std::filesystem;

class CorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trellis-corpus-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "texts" / "sub");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& rel, const std::string& content) {
    std::ofstream(dir_ / rel, std::ios::binary) << content;
    return (dir_ / rel).string();
  }
  // Builds a corpus file from three small documents; returns its path.
  std::string BuildSample() {
    Write("texts/a.txt", "alpha beta\n");
    Write("texts/sub/b.txt", "gamma\n");
    Write("texts/c.bin", std::string("bin\0ary", 7));
    Write("texts/d.txt", "delta epsilon zeta\n");
    Write("texts/e.txt", "");
    BuildStats stats;
    Corpus c = BuildByteCorpus({(dir_ / "texts").string()}, &stats);
    EXPECT_EQ(stats.files_used, 3);
    EXPECT_EQ(stats.files_skipped, 2);
    std::string path = (dir_ / "corpus.bin").string();
    WriteCorpus(path, c);
    return path;
  }
  // Expects ReadCorpus to fail with a message containing the path and `what`.
  // refused: a file that was read and is wrong is RefusedInput (no retry on
  // any node helps); one that cannot be opened is a plain TrainError.
  void ExpectReadError(const std::string& path, const std::string& what, bool refused = true) {
    try {
      ReadCorpus(path);
      ADD_FAILURE() << "no error for " << what;
    } catch (const TrainError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(dynamic_cast<const RefusedInput*>(&e) != nullptr, refused) << msg;
    }
  }
  fs::path dir_;
};

TEST_F(CorpusTest, BuildsDocumentsInSortedOrderAndReadsBack) {
  Corpus c = ReadCorpus(BuildSample());
  EXPECT_EQ(c.vocab, 256u);
  const std::vector<uint32_t> ids = c.tokens.ToVector();
  const std::string text(ids.begin(), ids.end());
  EXPECT_EQ(text, "alpha beta\ndelta epsilon zeta\ngamma\n");  // a, d, sub/b
  EXPECT_EQ(c.doc_starts.ToVector(), (std::vector<uint64_t>{0, 11, 30}));
}

// With data roots, what counts is the file as opened: a link inside a root
// to a corpus inside another root reads; one that leads out of every root
// is refused (RefusedInput) naming the path, where it led and the roots.
// Roots are resolved too (a root given through a link holds its target).
TEST_F(CorpusTest, DataRootsAreCheckedOnTheOpenedFile) {
  const std::string corpus = BuildSample();
  fs::create_directories(dir_ / "root" / "inner");
  fs::create_directory_symlink(dir_ / "root", dir_ / "root-link");
  fs::copy_file(corpus, dir_ / "root" / "inner" / "c.bin");
  fs::create_symlink(dir_ / "root" / "inner" / "c.bin", dir_ / "root" / "in.bin");
  fs::create_symlink(corpus, dir_ / "root" / "out.bin");
  const std::vector<std::string> roots = {"/nonexistent-root", (dir_ / "root-link").string()};

  EXPECT_EQ(ReadCorpus((dir_ / "root" / "in.bin").string(), roots).tokens.ToVector(),
            ReadCorpus(corpus).tokens.ToVector());
  EXPECT_EQ(ReadCorpus((dir_ / "root-link" / "inner" / "c.bin").string(), roots).vocab, 256u);
  const std::string out = (dir_ / "root" / "out.bin").string();
  try {
    ReadCorpus(out, roots);
    ADD_FAILURE() << "a link out of the roots was read";
  } catch (const RefusedInput& e) {
    const std::string msg = e.what();
    for (const std::string& part : {out, "(opened as " + fs::canonical(corpus).string() + ")",
                                    std::string("is not under a data root"), roots[1]})
      EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
  }
  // Without roots the same link reads (trellis-train alone checks nothing).
  EXPECT_EQ(ReadCorpus(out).vocab, 256u);
  EXPECT_THROW(ReadCorpus((dir_ / "root" / "absent.bin").string(), roots), TrainError);
}

TEST_F(CorpusTest, TruncatedFileNamesTheFile) {
  std::string path = BuildSample();
  fs::resize_file(path, fs::file_size(path) - 3);
  ExpectReadError(path, "truncated");
  fs::resize_file(path, 12);
  ExpectReadError(path, "truncated");
}

TEST_F(CorpusTest, FlippedByteIsACorruptFile) {
  std::string path = BuildSample();
  testing::FlipByte(path, 5);
  ExpectReadError(path, "checksum mismatch");
}

TEST_F(CorpusTest, OtherFilesAreRefusedByMagicAndVersion) {
  ExpectReadError(Write("text.bin", std::string(64, 'x')), "bad magic");
  std::string path = BuildSample();
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(8);
  f.put(7);
  f.close();
  ExpectReadError(path, "unsupported version 7");
  ExpectReadError((dir_ / "absent.bin").string(), "cannot open", /*refused=*/false);
}

TEST_F(CorpusTest, WellFormedFilesWithBadContentsAreRefused) {
  ExpectReadError(Write("empty.bin", ""), "truncated: 0 bytes");
  const std::string path = (dir_ / "bad.bin").string();
  WriteCorpus(path, OwnedCorpus(100, {1, 2, 99, 100, 7}, {0}));  // its checksum is right
  ExpectReadError(path, "token 3 is 100, not below the vocab size 100");
  WriteCorpus(path, OwnedCorpus(256, {1, 2, 3, 4}, {0, 3, 2}));
  ExpectReadError(path, "document 2 starts at 2: boundaries must increase");
  WriteCorpus(path, OwnedCorpus(256, {1, 2, 3, 4}, {1}));
  ExpectReadError(path, "the first document must start at token 0");
  ExpectReadError((dir_ / "texts").string(), "not a regular file", /*refused=*/false);
}

// The address range of /proc/self/maps that holds `p`, with what is mapped
// there ("" where nothing is).
std::string MappingOf(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &from, &to) == 2 && from <= at && at < to) return line;
  }
  return "";
}

// The tokens read are the file's own pages, not a copy in the rank's heap:
// the ranks of a node share them and the kernel may drop them. A corpus
// replaced by rename, as trellis-corpus writes one, leaves a reader on the
// file it opened.
TEST_F(CorpusTest, ReadTokensAreTheFilesPagesAndOutliveItsReplacement) {
  const std::string path = (dir_ / "mapped.bin").string();
  WriteCorpus(path, SyntheticCorpus(1000, 100000, 3));
  const Corpus read = ReadCorpus(path);
  const std::string mapping = MappingOf(read.tokens.data());
  EXPECT_NE(mapping.find(fs::canonical(path).string()), std::string::npos) << mapping;
  EXPECT_EQ(MappingOf(read.doc_starts.data()), mapping);
  const Corpus copy = read;  // shares the mapping
  EXPECT_EQ(copy.tokens.data(), read.tokens.data());

  WriteCorpus(path, SyntheticCorpus(1000, 100000, 4));
  EXPECT_EQ(copy.tokens.ToVector(), SyntheticCorpus(1000, 100000, 3).tokens.ToVector());
  EXPECT_EQ(ReadCorpus(path).tokens.ToVector(), SyntheticCorpus(1000, 100000, 4).tokens.ToVector());
}

using testing::V1File;

// Version-1 files still read, checked as before; rewritten, they become
// version 2 with the same tokens and another checksum, the old one still
// computable from them.
TEST_F(CorpusTest, VersionOneFilesStillRead) {
  const Corpus synthetic = SyntheticCorpus(500, 30000, 5, 1000);
  const std::string path = Write(
      "v1.bin", V1File(500, synthetic.tokens.ToVector(), synthetic.doc_starts.ToVector()));
  const Corpus v1 = ReadCorpus(path);
  EXPECT_EQ(v1.version, 1u);
  EXPECT_EQ(v1.vocab, 500u);
  EXPECT_EQ(v1.tokens.ToVector(), synthetic.tokens.ToVector());
  EXPECT_EQ(v1.doc_starts.ToVector(), synthetic.doc_starts.ToVector());
  const uint64_t fnv_of_starts =
      Fnv1a(synthetic.doc_starts.data(), 8 * synthetic.doc_starts.size());
  EXPECT_EQ(v1.checksum,
            Fnv1a(synthetic.tokens.data(), 2 * synthetic.tokens.size(), fnv_of_starts));
  const std::string v2 = (dir_ / "v2.bin").string();
  WriteCorpus(v2, v1);
  const Corpus rewritten = ReadCorpus(v2);
  EXPECT_EQ(rewritten.version, 2u);
  EXPECT_EQ(rewritten.tokens.ToVector(), synthetic.tokens.ToVector());
  EXPECT_EQ(rewritten.checksum, synthetic.checksum);  // a corpus's identity is its content's
  EXPECT_NE(rewritten.checksum, v1.checksum);
  // ... but version 1's checksum is still known from it (a checkpoint made
  // on the old file resumes on the new one); none for ids wider than v1's.
  EXPECT_EQ(VersionOneChecksum(v1), v1.checksum);
  EXPECT_EQ(VersionOneChecksum(rewritten), v1.checksum);
  EXPECT_EQ(VersionOneChecksum(SyntheticCorpus(70000, 1000, 5, 100)), std::nullopt);

  testing::FlipByte(path, 3);
  ExpectReadError(path, "checksum mismatch: the file is corrupt");
  ExpectReadError(Write("v1-short.bin", V1File(500, {1, 2, 3}, {0}).substr(0, 52)),
                  "truncated: 52 bytes, the header implies 54");
}

// Version 2 names where a corrupt byte lies: in the tokens (which ones), or
// in the boundaries and chunk checksums that the whole-file checksum covers.
TEST_F(CorpusTest, ACorruptChunkIsNamedByItsTokens) {
  const std::string path = (dir_ / "chunks.bin").string();
  const uint64_t n = 3 * kCorpusChunkTokens + 100;  // 4 chunks, the last of 100 tokens
  WriteCorpus(path, SyntheticCorpus(1000, static_cast<int64_t>(n), 2, 70000));
  const uint64_t docs = (n + 69999) / 70000;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto flip = [&f](std::streamoff at) {
    f.seekg(at);
    const char b = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(~b));
    f.flush();
  };
  const std::streamoff tokens_at = static_cast<std::streamoff>(48 + 8 * docs + 8 * 4);
  flip(tokens_at + 2 * static_cast<std::streamoff>(kCorpusChunkTokens) + 11);  // chunk 1
  flip(tokens_at + 2 * static_cast<std::streamoff>(3 * kCorpusChunkTokens) + 5);  // chunk 3
  ExpectReadError(path, "checksum mismatch in tokens " + std::to_string(kCorpusChunkTokens) +
                            " to " + std::to_string(2 * kCorpusChunkTokens - 1) +
                            " (chunk 1 of 4): the file is corrupt");
  flip(tokens_at + 2 * static_cast<std::streamoff>(kCorpusChunkTokens) + 11);
  ExpectReadError(path, "checksum mismatch in tokens " + std::to_string(3 * kCorpusChunkTokens) +
                            " to " + std::to_string(n - 1) + " (chunk 3 of 4)");
  flip(tokens_at + 2 * static_cast<std::streamoff>(3 * kCorpusChunkTokens) + 5);
  EXPECT_EQ(ReadCorpus(path).tokens.size(), n);  // whole again
  flip(tokens_at - 3);  // the last chunk checksum
  ExpectReadError(path, "checksum mismatch in the document boundaries or chunk checksums");
  flip(tokens_at - 3);
  flip(40);  // tokens per chunk: 2^18 -> 2^18 with its low byte flipped, the size no longer fits
  ExpectReadError(path, "the header implies");
  f.close();
  std::string zero_chunk = V1File(256, {1, 2}, {0});  // a version-2 header claiming K = 0
  zero_chunk[8] = 2;
  zero_chunk.insert(40, std::string(8, '\0'));
  ExpectReadError(Write("k0.bin", zero_chunk), "0 tokens per chunk (accepted: 1 to 2^40)");
}

// A vocab over 65536 (modern tokenizers have 100k-200k ids) stores u32 ids:
// they round-trip, rows carry them, and one past the vocab is refused.
TEST_F(CorpusTest, AVocabOverSixtyFiveThousandKeepsItsIdsInFourBytes) {
  const std::string path = (dir_ / "wide.bin").string();
  const Corpus made = SyntheticCorpus(200000, 300000, 6, 5000);
  ASSERT_EQ(made.tokens.width(), 4);
  const std::vector<uint32_t> ids = made.tokens.ToVector();
  ASSERT_GT(*std::max_element(ids.begin(), ids.end()), 65535u);
  WriteCorpus(path, made);
  EXPECT_EQ(static_cast<uint64_t>(fs::file_size(path)),
            48 + 8 * 60 + 8 * ChunkCount(300000, kCorpusChunkTokens) + 4 * 300000);
  const Corpus read = ReadCorpus(path);
  EXPECT_EQ(read.vocab, 200000u);
  EXPECT_EQ(read.tokens.width(), 4);
  EXPECT_EQ(read.tokens.ToVector(), ids);
  EXPECT_EQ(read.checksum, made.checksum);
  BatchSource rows(&read, /*seq_len=*/1000, /*global_batch=*/4, /*seed=*/1);
  const HostBatch b = rows.ForStep(0);
  const int64_t row = rows.RowAt(0);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(b.inputs[i], ids[row * 1000 + i]) << i;

  std::vector<uint32_t> bad = {5, 199999, 200000, 7};
  WriteCorpus(path, OwnedWideCorpus(200000, bad, {0}));
  ExpectReadError(path, "token 2 is 200000, not below the vocab size 200000");
  EXPECT_THROW(OwnedCorpus(200000, {1, 2}, {0}), TrainError);  // u16 ids for a wide vocab
  EXPECT_THROW(OwnedWideCorpus(1000, {1, 2}, {0}), TrainError);
}

TEST_F(CorpusTest, RowsMaskTargetsAcrossDocumentsAndCoverEachEpoch) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 101; ++i) tokens.push_back(i);
  const Corpus c = OwnedCorpus(256, std::move(tokens), {0, 7, 30, 31, 64});
  BatchSource source(&c, /*seq_len=*/10, /*global_batch=*/5, /*seed=*/99);
  ASSERT_EQ(source.num_rows(), 10);
  std::set<int64_t> first_epoch;
  for (int64_t step = 0; step < 2; ++step) {
    HostBatch b = source.ForStep(step);
    ASSERT_EQ(b.inputs.size(), 50u);
    for (int64_t r = 0; r < 5; ++r) {
      const int64_t row = source.RowAt(step * 5 + r);
      first_epoch.insert(row);
      for (int64_t i = 0; i < 10; ++i) {
        const int64_t pos = row * 10 + i, k = r * 10 + i;
        EXPECT_EQ(b.inputs[k], pos);
        const bool new_doc = pos + 1 == 7 || pos + 1 == 30 || pos + 1 == 31 || pos + 1 == 64;
        EXPECT_EQ(b.targets[k], new_doc ? -1 : pos + 1) << "position " << pos;
        const int64_t doc = pos < 7 ? 0 : pos < 30 ? 1 : pos < 31 ? 2 : pos < 64 ? 3 : 4;
        EXPECT_EQ(b.doc_ids[k], doc) << "position " << pos;
      }
    }
  }
  EXPECT_EQ(first_epoch.size(), 10u);  // every row exactly once per epoch
  // The order is a function of (seed, position): a fresh source agrees.
  BatchSource again(&c, 10, 5, 99), other(&c, 10, 5, 100);
  bool differs = false;
  for (int64_t k = 0; k < 30; ++k) {
    EXPECT_EQ(again.RowAt(k), source.RowAt(k));
    differs = differs || other.RowAt(k) != source.RowAt(k);
  }
  EXPECT_TRUE(differs);
}

TEST_F(CorpusTest, TooSmallForOneRowIsAClearError) {
  const Corpus c = OwnedCorpus(256, {1, 2, 3}, {0});
  EXPECT_THROW(BatchSource(&c, 8, 1, 1), RefusedInput);
}

TEST(SyntheticCorpusTest, DocumentsOfDocTokensCarryTheSameTokens) {
  const Corpus one = SyntheticCorpus(1000, 1000, 7);
  const Corpus split = SyntheticCorpus(1000, 1000, 7, 300);
  EXPECT_EQ(split.tokens.ToVector(), one.tokens.ToVector());
  EXPECT_EQ(one.doc_starts.ToVector(), std::vector<uint64_t>{0});
  // The last is shorter.
  EXPECT_EQ(split.doc_starts.ToVector(), (std::vector<uint64_t>{0, 300, 600, 900}));
  EXPECT_EQ(SyntheticCorpus(1000, 1000, 7, 1000).doc_starts.ToVector(), std::vector<uint64_t>{0});
  EXPECT_THROW(SyntheticCorpus(1000, 1000, 7, 1), TrainError);  // nothing to predict
  EXPECT_THROW(SyntheticCorpus(1000, 1000, 7, -4), TrainError);
}

TEST_F(CorpusTest, SyntheticDocumentsMaskAttentionAndTargetsAtTheirBoundaries) {
  const std::string path = (dir_ / "synth.bin").string();
  WriteCorpus(path, SyntheticCorpus(500, 4096, 3, 64));
  const Corpus c = ReadCorpus(path);
  ASSERT_EQ(c.doc_starts.size(), 64u);
  BatchSource src(&c, 256, 1, 0);
  const HostBatch b = src.ForStep(0);
  // A row of 256 positions over whole documents of 64: four document ids, and
  // no target crosses from one document into the next.
  const std::set<int64_t> ids(b.doc_ids.begin(), b.doc_ids.end());
  EXPECT_EQ(ids.size(), 4u);
  for (size_t t = 0; t + 1 < b.doc_ids.size(); ++t) {
    if (b.doc_ids[t] != b.doc_ids[t + 1]) {
      EXPECT_EQ(b.targets[t], -1) << "position " << t;
    }
  }
}

// trellis-corpus synthetic, as a user runs it: exit status, the file it
// writes, and the message for arguments it refuses (no file written).
// A checksum as trellis-corpus prints it.
std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

class CorpusCliTest : public CorpusTest {
 protected:
  int Run(const std::string& args, std::string* out) {
    const std::string cmd = std::string(TRELLIS_CORPUS_BIN) + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[512];
    out->clear();
    while (std::fgets(buf, sizeof buf, p)) *out += buf;
    const int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

// merge: the summary, each source's share, and a usage error without inputs.
TEST_F(CorpusCliTest, MergeWritesTheCorporaAsOneAndSaysEachShare) {
  const std::string a = (dir_ / "a.bin").string(), b = (dir_ / "b.bin").string();
  const std::string out = (dir_ / "ab.bin").string();
  WriteCorpus(a, SyntheticCorpus(1000, 3000, 1, 1000));
  WriteCorpus(b, SyntheticCorpus(70000, 1000, 2, 500));
  std::string text;
  ASSERT_EQ(Run("merge " + out + " " + a + " " + b, &text), 0) << text;
  EXPECT_NE(text.find(out + ": 4000 tokens, 5 documents from 2 corpora, vocab 70000, checksum " +
                      Hex16(ReadCorpus(out).checksum)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  " + a + ": 3000 tokens (75.0%), 3 documents, vocab 1000"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  " + b + ": 1000 tokens (25.0%), 2 documents, vocab 70000"),
            std::string::npos)
      << text;
  EXPECT_EQ(Run("merge " + out, &text), 2) << text;
  EXPECT_NE(text.find("usage:"), std::string::npos) << text;
  EXPECT_EQ(Run("merge " + out + " " + (dir_ / "missing.bin").string(), &text), 1) << text;
  EXPECT_NE(text.find("missing.bin"), std::string::npos) << text;
}

TEST_F(CorpusCliTest, SyntheticWritesDocumentsOfDocTokens) {
  const std::string path = (dir_ / "c.bin").string();
  std::string out;
  ASSERT_EQ(Run("synthetic " + path + " 1000 5000 9 512", &out), 0) << out;
  EXPECT_NE(out.find("5000 tokens, 10 documents, vocab 1000"), std::string::npos) << out;
  const Corpus c = ReadCorpus(path);
  EXPECT_EQ(c.tokens.ToVector(), SyntheticCorpus(1000, 5000, 9).tokens.ToVector());
  EXPECT_EQ(c.doc_starts.ToVector(), SyntheticCorpus(1000, 5000, 9, 512).doc_starts.ToVector());
  ASSERT_EQ(Run("synthetic " + path + " 1000 5000", &out), 0) << out;  // seed 1234, one document
  EXPECT_EQ(ReadCorpus(path).tokens.ToVector(),
            SyntheticCorpus(1000, 5000, 1234).tokens.ToVector());
  EXPECT_NE(out.find("5000 tokens, 1 document, vocab 1000"), std::string::npos) << out;
}

TEST_F(CorpusCliTest, UpgradeRewritesAVersionOneFileAndInfoSaysWhich) {
  const Corpus synthetic = SyntheticCorpus(300, 4000, 8, 900);
  const std::string v1 = Write(
      "old.bin", V1File(300, synthetic.tokens.ToVector(), synthetic.doc_starts.ToVector()));
  const std::string v2 = (dir_ / "new.bin").string();
  std::string out;
  ASSERT_EQ(Run("info " + v1, &out), 0) << out;
  EXPECT_NE(out.find("ok, format version 1, vocab 300, 4000 tokens, 5 documents"),
            std::string::npos) << out;
  ASSERT_EQ(Run("upgrade " + v1 + " " + v2, &out), 0) << out;
  EXPECT_NE(out.find("format version 1 -> 2, the same 4000 tokens and 5 documents"),
            std::string::npos) << out;
  EXPECT_NE(out.find("runs resume on it: a checkpoint made on the old file is known by its old "
                     "checksum"),
            std::string::npos)
      << out;
  EXPECT_EQ(ReadCorpus(v2).tokens.ToVector(), synthetic.tokens.ToVector());
  ASSERT_EQ(Run("info " + v2, &out), 0) << out;
  EXPECT_NE(out.find("ok, format version 2"), std::string::npos) << out;
  ASSERT_EQ(Run("upgrade " + v2 + " " + (dir_ / "again.bin").string(), &out), 0) << out;
  EXPECT_NE(out.find("format version 2 -> 2"), std::string::npos) << out;
  EXPECT_NE(out.find("(unchanged: runs resume on it)"), std::string::npos) << out;
  testing::FlipByte(v1, 1);
  EXPECT_EQ(Run("upgrade " + v1 + " " + (dir_ / "other.bin").string(), &out), 1) << out;
  EXPECT_NE(out.find("checksum mismatch"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "other.bin"));
}

TEST_F(CorpusCliTest, SyntheticRefusesBadNumbersNamingWhatIsAccepted) {
  const std::string path = (dir_ / "bad.bin").string();
  for (const char* args : {"1000 5000 9 1", "1000 5000 9 5001", "1000 5000 9 -64", "1000 5000 9 8x",
                           "1 5000", "16777217 5000", "1000 1", "1000 -5", "1000 5000 -1",
                           "1000 5000 9 64 extra"}) {
    std::string out;
    EXPECT_EQ(Run("synthetic " + path + " " + args, &out), 2) << args << ": " << out;
    EXPECT_FALSE(fs::exists(path)) << args;
    if (std::string(args) == "1000 5000 9 64 extra") {  // too many arguments: the usage
      EXPECT_NE(out.find("usage:"), std::string::npos) << out;
    } else {
      EXPECT_NE(out.find("DOC_TOKENS 0 (one document) or in [2, TOKENS]"), std::string::npos)
          << args << ": " << out;
    }
  }
}

}  // namespace
}  // namespace trellis::train
