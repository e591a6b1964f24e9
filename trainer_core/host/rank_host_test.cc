// The hosted rank writes one decodable step record per step to
// TRELLIS_STEP_SOCKET, and a bad environment is a clear exit 1. The trainer
// runs in forked children (multiprocess.h); the test process only listens.
#include "trainer_core/host/rank_host.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/exit_codes.h"
#include "common/step_record.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/file_test_util.h"
#include "trainer_core/files.h"
#include "trainer_core/parallel/multiprocess.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;

spec::TrainerSpec TinySpec(const std::string& corpus) {
  spec::TrainerSpec s;
  s.model.hidden = 32;
  s.model.expert_hidden = 32;
  s.training.seq_len = 32;
  s.training.global_batch = 4;
  s.training.steps = 3;
  s.training.data = corpus;
  return s;
}

// The byte corpus of the golden text, written to `path`.
void WriteGoldenCorpus(const std::string& path) {
  BuildStats stats;
  WriteCorpus(path, BuildByteCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}, &stats));
}

// A hosted rank on `corpus`, with TRELLIS_DATA_ROOTS set to `roots` (unset
// when empty), must exit kExitDoNotRetry.
void ExpectExit79(const std::string& corpus, const std::string& roots) {
  auto ranks = testing::RunRanks(1, 60s, [&](int) -> std::string {
    ::unsetenv("TRELLIS_STEP_SOCKET");
    ::unsetenv("TRELLIS_RESUME_STEP");
    if (roots.empty())
      ::unsetenv("TRELLIS_DATA_ROOTS");
    else
      ::setenv("TRELLIS_DATA_ROOTS", roots.c_str(), 1);
    const int code = RunHostedRank(TinySpec(corpus));
    return code == kExitDoNotRetry ? "" : "exit code " + std::to_string(code) + ", not 79";
  });
  EXPECT_EQ(testing::Failures(ranks), "");
}

TEST(RankHostTest, WritesOneRecordPerStepToTheStepSocket) {
  const std::string dir = MakeTempDir("trellis-rank-host-test");
  const std::string corpus = JoinPath(dir, "corpus.bin");
  WriteGoldenCorpus(corpus);
  const std::string path = JoinPath(dir, "steps.sock");
  int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);  // the kernel queues the connection; records fit its buffer

  auto ranks = testing::RunRanks(1, 120s, [&](int) -> std::string {
    ::setenv("TRELLIS_STEP_SOCKET", path.c_str(), 1);
    ::setenv("TRELLIS_CHECKPOINT_DIR", JoinPath(dir, "ckpt").c_str(), 1);
    return RunHostedRank(TinySpec(corpus)) == 0 ? "" : "exit code not 0";
  });
  ASSERT_EQ(testing::Failures(ranks), "");
  int conn = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(conn, buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::close(conn);
  ::close(listener);

  std::vector<StepRecord> records;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    std::string error;
    auto r = DecodeStepRecord(std::string_view(text).substr(at, nl - at), &error);
    ASSERT_TRUE(r) << error;
    records.push_back(*r);
  }
  ASSERT_EQ(records.size(), 3u) << text;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(records[i].step, i + 1);
    EXPECT_EQ(records[i].tokens, 4 * 32);
    EXPECT_GT(records[i].loss, 0);
  }
  // Run checkpoints when it returns (after the last record).
  EXPECT_TRUE(PathExists(JoinPath(dir, "ckpt/step-00000003/manifest.json")));
  RemoveTree(dir);
}

TEST(RankHostTest, BadResumeStepIsAClearExitOne) {
  auto ranks = testing::RunRanks(1, 60s, [&](int) -> std::string {
    ::setenv("TRELLIS_RESUME_STEP", "yesterday", 1);
    ::unsetenv("TRELLIS_STEP_SOCKET");
    return RunHostedRank(TinySpec("/nonexistent")) == 1 ? "" : "exit code not 1";
  });
  EXPECT_EQ(testing::Failures(ranks), "");
}

TEST(RankHostTest, BadMtbfIsAClearExitOne) {
  for (const char* bad : {"soon", "0", "-5", "nan"}) {
    auto ranks = testing::RunRanks(1, 60s, [&](int) -> std::string {
      ::unsetenv("TRELLIS_RESUME_STEP");
      ::unsetenv("TRELLIS_STEP_SOCKET");
      ::setenv("TRELLIS_MTBF_S", bad, 1);
      const int code = RunHostedRank(TinySpec("/nonexistent"));
      ::unsetenv("TRELLIS_MTBF_S");
      return code == 1 ? "" : std::string("TRELLIS_MTBF_S=") + bad + ": exit code not 1";
    });
    EXPECT_EQ(testing::Failures(ranks), "");
  }
}

// A corpus that resolves outside TRELLIS_DATA_ROOTS (here a link swapped
// to point out of the root after the controller's checks) stops the rank
// before it trains, with exit 79: the run fails at once, no node blamed.
TEST(RankHostTest, ACorpusOutsideTheDataRootsIsExit79) {
  const std::string dir = MakeTempDir("trellis-rank-host-test");
  const std::string outside = JoinPath(dir, "outside.bin");
  WriteGoldenCorpus(outside);
  const std::string root = JoinPath(dir, "root");
  MakeDirs(root);
  const std::string link = JoinPath(root, "corpus.bin");
  ASSERT_EQ(::symlink(outside.c_str(), link.c_str()), 0);
  ExpectExit79(link, "/nonexistent\n" + root);
  RemoveTree(dir);
}

// A corpus that reads but is corrupt fails the same way on every node: exit
// 79, no retry, no node blamed.
TEST(RankHostTest, ACorruptCorpusIsExit79) {
  const std::string dir = MakeTempDir("trellis-rank-host-test");
  const std::string path = JoinPath(dir, "corpus.bin");
  WriteGoldenCorpus(path);
  testing::FlipByte(path, 5);
  ExpectExit79(path, "");
  RemoveTree(dir);
}

}  // namespace
}  // namespace trellis::train
