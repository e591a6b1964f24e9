// A run started from another's checkpoint keeps hard links to that step in
// its own directory (init_from_link.h), on real files and a real store: the
// links outlive the source's pruning; where they cannot be made the run says
// it is not protected; the scheduler asks for them at submit, never on a dry
// run.
#include "controller/app/init_from_link.h"

#include <sys/stat.h>

#include <fstream>

#include "common/checkpoint_layout.h"
#include "common/spec/run_spec.h"
#include "controller/app/corpus_file_test_util.h"
#include "controller/app/part_test_util.h"
#include "controller/app/scheduler.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class InitFromLinkTest : public PartTest {
 protected:
  // A complete step: a shard, a nested file and the manifest.
  void WriteStep(const std::string& dir, int64_t step) {
    const fs::path s = CheckpointStepDir(dir, step);
    fs::create_directories(s / "extra");
    std::ofstream(s / "shard-00000.bin") << "weights";
    std::ofstream(s / "extra" / "state.bin") << "state";
    std::ofstream(s / "manifest.json") << "{}";
  }
  static ino_t InodeOf(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
  }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string src_ = config_.output_root + "/src-1/checkpoints";
  std::string copy_ = InitFromCopyDir(config_.output_root + "/fork-2", "src-1");
};

TEST_F(InitFromLinkTest, TheLinkedStepOutlivesTheSourcesPruning) {
  WriteStep(src_, 10);
  ASSERT_TRUE(LinkCheckpointStep(src_, 10, copy_).ok());
  EXPECT_EQ(copy_, config_.output_root + "/fork-2/init-from/src-1/checkpoints");
  const fs::path step = CheckpointStepDir(copy_, 10);
  EXPECT_EQ(InodeOf(step / "shard-00000.bin"),
            InodeOf(fs::path(CheckpointStepDir(src_, 10)) / "shard-00000.bin"))
      << "a hard link, not a copy";
  fs::remove_all(CheckpointStepDir(src_, 10));  // the source's pruner
  EXPECT_EQ(CompleteCheckpoints(copy_), std::vector<int64_t>{10});
  EXPECT_EQ(Read(step / "shard-00000.bin"), "weights");
  EXPECT_EQ(Read(step / "extra" / "state.bin"), "state");
}

TEST_F(InitFromLinkTest, AFailedLinkLeavesNothingOfTheStep) {
  absl::Status st = LinkCheckpointStep(src_, 10, copy_);  // no such step
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(CheckpointStepDir(src_, 10)), std::string::npos) << st;
  EXPECT_FALSE(fs::exists(CheckpointStepDir(copy_, 10)));
}

class KeepInitFromTest : public InitFromLinkTest {
 protected:
  void SetUp() override {
    auto opened = Store::Open((root_ / "controller.db").string());
    ASSERT_TRUE(opened.ok()) << opened.status();
    db_ = std::move(*opened);
    auto run = db_->CreateRun(
        "fork", "alice",
        "# trellis fork src-1 --step 10\n[job]\nname = \"fork\"\ncommand = \"true\"\n", 1, 1,
        [&](const std::string& id) { return config_.output_root + "/" + id; }, clock_.Now());
    ASSERT_TRUE(run.ok()) << run.status();
    run_ = *run;
  }
  std::string LastEvent() {
    auto events = db_->Events(run_.run_id);
    return events.ok() && !events->empty() ? events->back().reason : "";
  }
  std::unique_ptr<Store> db_;
  RunRecord run_;
};

TEST_F(KeepInitFromTest, TheSpecPointsAtTheRunsOwnLinks) {
  WriteStep(src_, 10);
  RunRecord kept = KeepInitFromStep(*db_, run_, {src_, 10, "src-1"}, clock_.Now());
  const std::string copy = InitFromCopyDir(run_.run_dir, "src-1");
  EXPECT_EQ(CompleteCheckpoints(copy), std::vector<int64_t>{10});
  EXPECT_EQ(kept.spec_toml.rfind("# trellis fork src-1 --step 10\n", 0), 0u) << kept.spec_toml;
  EXPECT_NE(kept.spec_toml.find("init_from = '" + copy + "@10'"), std::string::npos)
      << kept.spec_toml;
  EXPECT_EQ(db_->GetRun(run_.run_id)->spec_toml, kept.spec_toml);
  EXPECT_EQ(LastEvent(), "training.init_from: step 10 of src-1 linked into the run's directory, "
                         "kept should src-1 prune it");
}

TEST_F(KeepInitFromTest, UnlinkableItSaysSoAndKeepsTheSource) {
  // No step to link (gone, or on another filesystem: the same path).
  RunRecord kept = KeepInitFromStep(*db_, run_, {src_, 10, "src-1"}, clock_.Now());
  EXPECT_EQ(kept.spec_toml, run_.spec_toml);
  const std::string said = LastEvent();
  EXPECT_EQ(said.rfind("training.init_from: step 10 of src-1 could not be linked into the "
                       "run's directory (cannot list ",
                       0),
            0u)
      << said;
  EXPECT_NE(said.find("the run reads it in " + src_ + ", not protected from the source's "
                      "pruning"),
            std::string::npos)
      << said;
}

TEST_F(InitFromLinkTest, TheSchedulerAsksForTheLinksAtSubmitNotOnADryRun) {
  test_files::WriteCorpusShapedFile(root_ / "tiny.corpus");
  AddRun(RunState::kSucceeded, 1).run_dir = config_.output_root + "/hello-1";
  WriteStep(config_.output_root + "/hello-1/checkpoints", 10);
  const std::string fork = "[job]\nname = \"m\"\n[model]\nlayers = 1\n[training]\ndata = \"" +
                           (root_ / "tiny.corpus").string() + "\"\ninit_from = \"hello-1@10\"\n";
  Scheduler scheduler(ctx_);
  Effects dry = scheduler.Submit(fork, /*dry_run=*/true, "alice", {1});
  EXPECT_TRUE(dry.All<CreateRun>().empty());
  Effects fx = scheduler.Submit(fork, /*dry_run=*/false, "alice", {2});
  CreateRun create = Only<CreateRun>(fx);
  ASSERT_TRUE(create.init_from_source.has_value());
  EXPECT_EQ(create.init_from_source->run, "hello-1");
  EXPECT_EQ(create.init_from_source->step, 10);
  EXPECT_EQ(create.init_from_source->dir, config_.output_root + "/hello-1/checkpoints");
  EXPECT_FALSE(fs::exists(config_.output_root + "/m-2")) << "linked by the shell, not here";
  // A directory given as a path names no run: nothing to keep.
  const std::string by_path = "[job]\nname = \"m\"\n[model]\nlayers = 1\n[training]\ndata = \"" +
                              (root_ / "tiny.corpus").string() + "\"\ninit_from = \"" +
                              config_.output_root + "/hello-1/checkpoints@10\"\n";
  EXPECT_FALSE(Only<CreateRun>(scheduler.Submit(by_path, false, "alice", {3}))
                   .init_from_source.has_value());
}

}  // namespace
}  // namespace trellis::controller
