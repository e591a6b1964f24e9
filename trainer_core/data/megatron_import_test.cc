// trellis-corpus import-megatron's reader and the streaming corpus writer,
// on Megatron-LM indexed datasets written here by the published layout.
#include "trainer_core/data/megatron_import.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/corpus_chunks.h"
#include "trainer_core/data/corpus_writer.h"
#include "trainer_core/error.h"

namespace trellis::train {
namespace {

namespace fs = std::filesystem;

template <typename T>
void Put(std::ofstream& f, T v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

// PREFIX.idx and PREFIX.bin as Megatron's IndexedDatasetBuilder writes them:
// sequences of ids stored as `Id` (dtype `code`), the document indices 0 and
// then the end sequence of each document.
template <typename Id>
void WriteMegatron(const std::string& prefix, uint8_t code,
                   const std::vector<std::vector<Id>>& sequences,
                   const std::vector<int64_t>& document_indices) {
  std::ofstream bin(prefix + ".bin", std::ios::binary), idx(prefix + ".idx", std::ios::binary);
  std::vector<int64_t> pointers;
  int64_t at = 0;
  for (const auto& s : sequences) {
    pointers.push_back(at);
    bin.write(reinterpret_cast<const char*>(s.data()), sizeof(Id) * s.size());
    at += static_cast<int64_t>(sizeof(Id) * s.size());
  }
  idx.write("MMIDIDX\0\0", 9);
  Put<uint64_t>(idx, 1);
  Put<uint8_t>(idx, code);
  Put<uint64_t>(idx, sequences.size());
  Put<uint64_t>(idx, document_indices.size());
  for (const auto& s : sequences) Put<int32_t>(idx, static_cast<int32_t>(s.size()));
  for (int64_t p : pointers) Put<int64_t>(idx, p);
  for (int64_t d : document_indices) Put<int64_t>(idx, d);
}

class MegatronImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trellis-megatron-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // Expects the import to be refused naming `what`, and nothing written.
  void ExpectRefused(uint32_t vocab, const std::string& what) {
    try {
      ImportMegatron(Path("m"), vocab, Path("out.corpus"));
      ADD_FAILURE() << "no error for " << what;
    } catch (const RefusedInput& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(Path("out.corpus")));
    EXPECT_FALSE(fs::exists(Path("out.corpus.tmp")));
  }
  fs::path dir_;
};

// Documents of one and of two sequences, and an empty one (left out); ids of
// a 150k vocab stored as int32 become a corpus of 4-byte ids.
TEST_F(MegatronImportTest, DocumentsAndTheirSequencesBecomeTheCorpus) {
  WriteMegatron<uint16_t>(Path("m"), 8, {{5, 6, 7}, {8, 9}, {10}, {11, 12, 13, 14}},
                          {0, 1, 3, 3, 4});
  const MegatronImport r = ImportMegatron(Path("m"), 1000, Path("out.corpus"));
  EXPECT_EQ(r.sequences, 4u);
  EXPECT_EQ(r.documents, 4u);
  EXPECT_EQ(r.empty_documents, 1u);
  EXPECT_EQ(r.tokens, 10u);
  const Corpus c = ReadCorpus(Path("out.corpus"));
  EXPECT_EQ(c.tokens.ToVector(), (std::vector<uint32_t>{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));
  EXPECT_EQ(c.doc_starts.ToVector(), (std::vector<uint64_t>{0, 3, 6}));
  EXPECT_EQ(c.vocab, 1000u);
  EXPECT_EQ(c.checksum, r.checksum);

  WriteMegatron<int32_t>(Path("m"), 4, {{149999, 0, 70000}, {65536, 3}}, {0, 2});
  ImportMegatron(Path("m"), 150000, Path("out.corpus"));
  const Corpus wide = ReadCorpus(Path("out.corpus"));
  EXPECT_EQ(wide.tokens.width(), 4);
  EXPECT_EQ(wide.tokens.ToVector(), (std::vector<uint32_t>{149999, 0, 70000, 65536, 3}));
}

// Several chunks, written a sequence at a time: the checksums the reader
// checks are the writer's, whichever way the sequences cut the chunks.
TEST_F(MegatronImportTest, ALargeDatasetStreamsThroughTheChunks) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<std::vector<uint16_t>> sequences;
  std::vector<int64_t> documents = {0};
  std::vector<uint32_t> all;
  for (int s = 0; s < 40; ++s) {
    sequences.emplace_back(1 + rng() % 40000);
    for (auto& id : sequences.back()) all.push_back(id = static_cast<uint16_t>(rng() % 32000));
    if (rng() % 3 == 0 || s == 39) documents.push_back(s + 1);
  }
  ASSERT_GT(all.size(), kCorpusChunkTokens);
  WriteMegatron<uint16_t>(Path("m"), 8, sequences, documents);
  ImportMegatron(Path("m"), 32000, Path("out.corpus"));
  const Corpus c = ReadCorpus(Path("out.corpus"));  // every chunk checked
  EXPECT_EQ(c.tokens.ToVector(), all);
  EXPECT_EQ(c.doc_starts.size(), documents.size() - 1);
}

TEST_F(MegatronImportTest, BadDatasetsAreRefusedNamingWhatIsWrong) {
  WriteMegatron<uint16_t>(Path("m"), 8, {{1, 2}, {3, 999, 1000}}, {0, 2});
  ExpectRefused(1000, "m.bin: sequence 1, id 2 is 1000, not in [0, vocab 1000)");
  WriteMegatron<int32_t>(Path("m"), 4, {{1, 2}, {-1, 3}}, {0, 2});
  ExpectRefused(1000, "sequence 1, id 0 is -1, not in [0, vocab 1000)");
  WriteMegatron<float>(Path("m"), 7, {{1, 2}}, {0, 1});
  ExpectRefused(1000, "m.idx: dtype code 7: token ids must be integers");
  WriteMegatron<uint16_t>(Path("m"), 8, {{1, 2}, {3, 4}}, {0, 1});
  ExpectRefused(1000, "its documents do not end at the last sequence (2)");
  WriteMegatron<uint16_t>(Path("m"), 8, {{1, 2}, {3, 4}}, {0, 2});
  fs::resize_file(Path("m.bin"), 6);
  ExpectRefused(1000, "sequence 1 (2 ids at byte 4) does not lie in");
  std::ofstream(Path("m.idx")) << "a text file";
  ExpectRefused(1000, "not a Megatron index (no MMIDIDX header)");
  EXPECT_THROW(ImportMegatron(Path("absent"), 1000, Path("out.corpus")), TrainError);
}

// As a user runs it: the counts on success, the vocab asked for when wrong.
TEST_F(MegatronImportTest, TheCommandSaysWhatItImported) {
  WriteMegatron<uint16_t>(Path("m"), 8, {{5, 6, 7}, {8, 9}, {10}}, {0, 1, 1, 3});
  auto run = [&](const std::string& args, std::string* out) {
    const std::string cmd = std::string(TRELLIS_CORPUS_BIN) + " import-megatron " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[512];
    out->clear();
    while (p && std::fgets(buf, sizeof buf, p)) *out += buf;
    const int status = p ? ::pclose(p) : -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  ASSERT_EQ(run(Path("c.corpus") + " " + Path("m") + " 1000", &out), 0) << out;
  EXPECT_NE(out.find("6 tokens, 2 documents (1 empty, left out) of 3 sequences, vocab 1000"),
            std::string::npos)
      << out;
  EXPECT_EQ(ReadCorpus(Path("c.corpus")).doc_starts.ToVector(), (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(run(Path("d.corpus") + " " + Path("m") + " 32k", &out), 2) << out;
  EXPECT_NE(out.find("VOCAB in [2, 2^24]"), std::string::npos) << out;
  EXPECT_EQ(run(Path("d.corpus") + " " + Path("m") + " 9", &out), 1) << out;
  EXPECT_NE(out.find("sequence 1, id 1 is 9, not in [0, vocab 9)"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(Path("d.corpus")));
}

TEST_F(MegatronImportTest, TheWriterWantsTheTokensItAnnounced) {
  const uint16_t ids[3] = {1, 2, 3};
  {
    CorpusWriter w(Path("w.corpus"), 100, 4, {0});
    w.Append(ids, 3);
    EXPECT_THROW(w.Finish(), TrainError);
  }
  EXPECT_FALSE(fs::exists(Path("w.corpus")));
  EXPECT_FALSE(fs::exists(Path("w.corpus.tmp")));
  CorpusWriter w(Path("w.corpus"), 100, 2, {0});
  EXPECT_THROW(w.Append(ids, 3), TrainError);
}

// An import cut short keeps the corpus already there, and leaves no
// temporary file; ids given one at a time make the same file as given at once.
TEST_F(MegatronImportTest, AnUnfinishedWriterLeavesThePreviousCorpusAndNoTemporaryFile) {
  std::vector<uint16_t> ids(3 * kCorpusChunkTokens + 5);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(i * 7 % 1000);
  auto bytes = [&] {
    std::ifstream in(Path("w.corpus"), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CorpusWriter at_once(Path("w.corpus"), 1000, ids.size(), {0, 5});
  at_once.Append(ids.data(), ids.size());
  const uint64_t checksum = at_once.Finish();
  const std::string previous = bytes();
  {
    CorpusWriter w(Path("w.corpus"), 1000, ids.size(), {0});
    w.Append(ids.data(), kCorpusChunkTokens + 1);
  }  // the import fails here
  EXPECT_EQ(bytes(), previous);
  EXPECT_FALSE(fs::exists(Path("w.corpus.tmp")));
  CorpusWriter one_by_one(Path("w.corpus"), 1000, ids.size(), {0, 5});
  for (const uint16_t& id : ids) one_by_one.Append(&id, 1);
  EXPECT_EQ(one_by_one.Finish(), checksum);
  EXPECT_TRUE(bytes() == previous) << "the same file, byte for byte";
  EXPECT_EQ(ReadCorpus(Path("w.corpus")).tokens.ToVector(),
            std::vector<uint32_t>(ids.begin(), ids.end()));
}

}  // namespace
}  // namespace trellis::train
