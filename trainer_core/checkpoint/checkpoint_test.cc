#include "trainer_core/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <optional>

#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/checkpoint/tensor_io.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/error.h"
#include "trainer_core/file_test_util.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

spec::TrainerSpec TinySpec() {
  spec::TrainerSpec s;
  s.model.layers = 2;
  s.model.hidden = 16;
  s.model.heads = 2;
  s.model.kv_heads = 1;
  s.model.experts = 3;
  s.model.expert_hidden = 8;
  s.model.vocab = 20;
  s.training.seq_len = 8;
  return s;
}

// A model plus optimizer state: the same kinds of tensors a trainer saves.
struct Fixture {
  explicit Fixture(const spec::TrainerSpec& s)
      : model(s.model, s.training.seq_len, 7, torch::kCPU, torch::kFloat),
        muon(SlotsFor(model.blocks(), Optim::kMuon), {}),
        adamw(SlotsFor(model.blocks(), Optim::kAdamW), {}) {}
  NamedTensors State() {
    NamedTensors out;
    for (auto& b : model.blocks()) out.emplace_back("param." + b.layout->name, b.flat);
    for (auto& t : muon.State()) out.push_back(t);
    for (auto& t : adamw.State()) out.push_back(t);
    return out;
  }
  Model model;
  Muon muon;
  AdamW adamw;
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-ckpt-test"); }
  void TearDown() override { RemoveTree(dir_); }
  static void Truncate(const std::string& path, int64_t size) {
    ASSERT_EQ(::truncate(path.c_str(), size), 0) << path;
  }
  static void Copy(const std::string& from, const std::string& to) {
    std::ifstream in(from, std::ios::binary);
    std::ofstream(to, std::ios::binary | std::ios::trunc) << in.rdbuf();
  }

  // Saves a randomized fixture at `step`; returns its state (cloned).
  std::vector<torch::Tensor> SaveAt(int64_t step, int keep = 5) {
    Fixture f(spec_);
    std::vector<torch::Tensor> saved;
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : f.State()) {
      if (t.is_floating_point())
        t.copy_(torch::randn_like(t));
      else
        t.fill_(step);
      saved.push_back(t.clone());
    }
    SaveCheckpoint(dir_, spec_, {step, step * 8, 0xABCDEFull, 2}, f.State(), keep);
    return saved;
  }
  std::string ShardPath(int64_t step) { return StepDir(dir_, step) + "/shard-00000-of-00001.bin"; }
  std::string ManifestPath(int64_t step) { return StepDir(dir_, step) + "/manifest.json"; }
  // Expects loading `step` to fail with a message containing all of `parts`,
  // as a damaged step (error.h: its files are not what the manifest
  // recorded) or not (the step does not fit the spec or this build).
  enum Damage { kDamaged, kNotDamaged };
  void ExpectLoadError(int64_t step, const spec::TrainerSpec& spec,
                       std::vector<std::string> parts, Damage damage = kDamaged) {
    Fixture f(spec);
    try {
      LoadCheckpoint(dir_, step, spec, f.State());
      ADD_FAILURE() << "loaded without error";
    } catch (const TrainError& e) {
      for (const auto& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "missing '" << p << "' in: " << e.what();
      const auto* damaged = dynamic_cast<const DamagedCheckpoint*>(&e);
      EXPECT_EQ(damaged != nullptr, damage == kDamaged) << e.what();
      if (damaged) {
        EXPECT_EQ(damaged->step(), step);
      }
    }
  }

  std::string dir_;
  spec::TrainerSpec spec_ = TinySpec();
};

TEST_F(CheckpointTest, RoundTripsEveryTensorAndTheDataPosition) {
  auto saved = SaveAt(3);
  Fixture fresh(spec_);
  CheckpointMeta meta = LoadCheckpoint(dir_, 3, spec_, fresh.State());
  EXPECT_EQ(meta.step, 3);
  EXPECT_EQ(meta.rows_consumed, 24);
  EXPECT_EQ(meta.corpus_checksum, 0xABCDEFull);
  EXPECT_EQ(meta.corpus_version, 2u);
  EXPECT_EQ(meta.shard_files_read, 1);
  EXPECT_EQ(meta.bytes_read, std::filesystem::file_size(ShardPath(3)));
  auto state = fresh.State();
  ASSERT_EQ(state.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i)
    EXPECT_TRUE(torch::equal(state[i].second, saved[i])) << state[i].first;
}

TEST(CheckpointLoadNote, SaysTheStepTheTimeTheBytesAndTheRate) {
  CheckpointMeta meta;
  meta.step = 10;
  meta.shard_files_read = 1;
  meta.bytes_read = 5ull << 30;
  EXPECT_EQ(DescribeLoad(meta, 2.0),
            "checkpoint step 10 read in 2.0 s: 5.00 GiB from 1 shard file (2.50 GiB/s, checksums "
            "and the copy to the device included)");
  meta.shard_files_read = 2;
  EXPECT_NE(DescribeLoad(meta, 0.0).find("from 2 shard files (0.00 GiB/s"), std::string::npos);
}

TEST_F(CheckpointTest, AStepWithoutManifestDoesNotCount) {
  SaveAt(3);
  SaveAt(6);
  std::remove(ManifestPath(6).c_str());  // as if the process died before the rename
  EXPECT_EQ(LatestCompleteStep(dir_), 3);
  ExpectLoadError(6, spec_,
                  {StepDir(dir_, 6) + ": no manifest.json (the step is incomplete); the complete "
                                      "steps in " + dir_ + ": 3"},
                  kNotDamaged);
  // A step that was never written (a mistyped --resume): named, with the ones there are.
  ExpectLoadError(9, spec_, {StepDir(dir_, 9) + ": no such step; the complete steps in " + dir_ +
                             ": 3"},
                  kNotDamaged);
  EXPECT_THROW(CheckCheckpoint(dir_, 9, spec_), TrainError);
  EXPECT_EQ(CheckCheckpoint(dir_, 3, spec_).step, 3);
  EXPECT_EQ(LatestCompleteStep(dir_ + "/absent"), -1);
}

TEST_F(CheckpointTest, TruncatedShardNamesTheFile) {
  SaveAt(2);
  Truncate(ShardPath(2), FileSize(ShardPath(2)) - 10);
  ExpectLoadError(2, spec_, {ShardPath(2), "truncated"});
  Truncate(ShardPath(2), 20);
  ExpectLoadError(2, spec_, {ShardPath(2), "truncated"});
}

TEST_F(CheckpointTest, FlippedByteNamesTheFileAndTheTensor) {
  SaveAt(2);
  testing::FlipByte(ShardPath(2), 3);  // inside the last tensor
  ExpectLoadError(2, spec_, {ShardPath(2), "is corrupt", "adamw.v.final.head"});
}

// Written by the build before shard version 2 (FNV-1a checksums, the whole
// file's in the manifest): trainer_core/testdata/checkpoint-v2 holds step 4
// of the fixture with tensor i filled with (k mod 97) / 4 - i at element k.
// A run started before an upgrade still resumes from it.
TEST_F(CheckpointTest, ACheckpointOfManifestVersion2StillLoads) {
  const std::string old_dir = std::string(TRELLIS_TESTDATA) + "/checkpoint-v2";
  Fixture f(spec_);
  CheckpointMeta meta = LoadCheckpoint(old_dir, 4, spec_, f.State());
  EXPECT_EQ(meta.step, 4);
  EXPECT_EQ(meta.rows_consumed, 32);
  EXPECT_EQ(meta.corpus_checksum, 0xABCDEFull);
  EXPECT_EQ(meta.corpus_version, 0u) << "not recorded then";
  int i = 0;
  for (auto& [name, t] : f.State()) {
    if (t.is_floating_point()) {
      auto want = (torch::arange(t.numel(), torch::kDouble).remainder(97) * 0.25 - i)
                      .view(t.sizes())
                      .to(t.scalar_type());
      EXPECT_TRUE(torch::equal(t, want)) << name;
    } else {
      EXPECT_TRUE(torch::equal(t, torch::full_like(t, 4))) << name;
    }
    ++i;
  }
  // Its shard is still checked against the manifest's whole-file checksum.
  MakeDirs(StepDir(dir_, 4));
  Copy(old_dir + "/step-00000004/manifest.json", ManifestPath(4));
  Copy(old_dir + "/step-00000004/shard-00000-of-00001.bin", ShardPath(4));
  testing::FlipByte(ShardPath(4), 3);
  ExpectLoadError(4, spec_, {ShardPath(4), "checksum differs from the manifest"});
}

// On a GPU the tensors go through two pinned buffers in pieces of 64 MiB: a
// tensor of three pieces (the last one short), one of exactly one, and small
// ones, saved from and loaded back into device memory.
TEST_F(CheckpointTest, DeviceTensorsRoundTripThroughPinnedPieces) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto on_gpu = torch::TensorOptions().device(torch::kCUDA);
  NamedTensors state = {
      {"three_pieces", torch::randn({(2 * kPinnedPieceBytes + 4096) / 4}, on_gpu)},
      {"one_piece", torch::randn({kPinnedPieceBytes / 2}, on_gpu.dtype(torch::kBFloat16))},
      {"small", torch::randn({3, 5}, on_gpu)},
      {"steps", torch::full({1}, 7, on_gpu.dtype(torch::kLong))}};
  SaveCheckpoint(dir_, spec_, {2, 16, 0xABCDEFull}, state, 5);
  NamedTensors loaded;
  for (auto& [name, t] : state) loaded.emplace_back(name, torch::zeros_like(t));
  CheckpointMeta meta = LoadCheckpoint(dir_, 2, spec_, loaded);
  EXPECT_EQ(meta.bytes_read, std::filesystem::file_size(ShardPath(2)));
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(torch::equal(loaded[i].second, state[i].second)) << state[i].first;
  // The file holds what the device held (read on the host).
  ShardReader shard(ShardPath(2));
  const std::string bytes = shard.ReadBytes(*shard.Find("small"));
  auto host = state[2].second.cpu();
  EXPECT_EQ(std::memcmp(bytes.data(), host.data_ptr(), bytes.size()), 0);
}

TEST(CheckpointSaveNote, SaysTheStepTheTimeTheBytesAndTheRate) {
  EXPECT_EQ(DescribeSave(20, 3ull << 30, 2.0),
            "checkpoint step 20 written in 2.0 s: 3.00 GiB (1.50 GiB/s, checksums, the copy from "
            "the device and fsync included)");
}

TEST_F(CheckpointTest, CorruptManifestNamesTheFile) {
  SaveAt(4);
  std::ofstream(ManifestPath(4)) << "{\"format\": \"trellis-checkpoint\", \"vers";
  ExpectLoadError(4, spec_, {ManifestPath(4), "not valid JSON"});
  std::ofstream(ManifestPath(4)) << "{\"format\": \"trellis-checkpoint\", \"version\": 9}";
  ExpectLoadError(4, spec_, {ManifestPath(4), "unsupported version 9", "reads 2 to 3"},
                  kNotDamaged);
  SaveAt(5);
  std::ifstream in(ManifestPath(5));
  nlohmann::json manifest = nlohmann::json::parse(in);
  in.close();
  manifest["shards"][0].erase("index_xxh64");
  std::ofstream(ManifestPath(5)) << manifest.dump();
  ExpectLoadError(5, spec_, {ManifestPath(5), "missing or mistyped field", "index_xxh64"},
                  kNotDamaged);
}

TEST_F(CheckpointTest, SpecMismatchNamesTheField) {
  SaveAt(5);
  spec::TrainerSpec other = spec_;
  other.model.hidden = 32;
  other.training.global_batch = 3;
  ExpectLoadError(5, other,
                  {ManifestPath(5), "model.hidden is 16 in the checkpoint, 32 in the spec",
                   "training.global_batch is 8 in the checkpoint, 3 in the spec"},
                  kNotDamaged);
}

TEST_F(CheckpointTest, ReplacedShardIsCaughtByTheManifestChecksum) {
  SaveAt(1);
  Copy(ShardPath(1), dir_ + "/keep.bin");
  SaveAt(2);
  Copy(dir_ + "/keep.bin", ShardPath(2));
  ExpectLoadError(2, spec_, {ShardPath(2), "checksum differs from the manifest"});
}

TEST_F(CheckpointTest, KeepsOnlyTheNewest) {
  for (int64_t step : {1, 2, 3, 4}) SaveAt(step, /*keep=*/2);
  EXPECT_FALSE(PathExists(StepDir(dir_, 1)));
  EXPECT_FALSE(PathExists(StepDir(dir_, 2)));
  EXPECT_TRUE(PathExists(ManifestPath(3)));
  EXPECT_TRUE(PathExists(ManifestPath(4)));
}

}  // namespace
}  // namespace trellis::train
