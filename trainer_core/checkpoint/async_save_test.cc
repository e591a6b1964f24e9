// A checkpoint written behind the steps (world 1; several ranks in
// parallel/multirank_test.cc): it holds the state as it was when the save
// began, counts only once completed, fails with the shard named, and
// leaves nothing complete when abandoned.
#include "trainer_core/checkpoint/async_save.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "trainer_core/checkpoint/tensor_io.h"
#include "trainer_core/compat.h"
#include "trainer_core/error.h"
#include "trainer_core/file_test_util.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

spec::TrainerSpec Spec() {
  spec::TrainerSpec s;
  s.training.seq_len = 8;
  return s;
}

// Tensors of the kinds a trainer saves, one of them larger than a 64 MiB
// piece (so that a write takes pieces), on `device`.
NamedTensors RandomState(torch::Device device) {
  const auto o = torch::TensorOptions().device(device);
  return {{"param.big", torch::randn({(kPinnedPieceBytes + 4096) / 4}, o)},
          {"param.small", torch::randn({3, 5}, o.dtype(torch::kBFloat16))},
          {"adamw.step", torch::full({1}, 7, o.dtype(torch::kLong))}};
}

std::vector<torch::Tensor> Clones(const NamedTensors& state) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : state) out.push_back(t.clone());
  return out;
}

class AsyncSaveTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-async-save-test"); }
  void TearDown() override { RemoveTree(dir_); }
  std::string Manifest(int64_t step) { return JoinPath(StepDir(dir_, step), "manifest.json"); }
  std::string Shard(int64_t step) {
    return JoinPath(StepDir(dir_, step), "shard-00000-of-00001.bin");
  }
  // Loads `step` into zeroed tensors shaped as `like` (on the CPU).
  NamedTensors Load(int64_t step, const NamedTensors& like) {
    NamedTensors out;
    for (const auto& [name, t] : like)
      out.emplace_back(name, torch::zeros(t.sizes(), t.options().device(torch::kCPU)));
    LoadCheckpoint(dir_, step, spec_, out);
    return out;
  }

  std::string dir_;
  spec::TrainerSpec spec_ = Spec();
};

TEST_F(AsyncSaveTest, HoldsTheStateAsItWasWhenTheSaveBegan) {
  NamedTensors state = RandomState(torch::kCPU);
  const auto before = Clones(state);
  AsyncCheckpointWriter writer(dir_, spec_, 5, {}, false);
  EXPECT_FALSE(writer.Begin({4, 32, 0xABCull}, state));
  EXPECT_TRUE(writer.in_flight());
  for (auto& [name, t] : state) t.add_(1);  // the next optimizer step
  const auto done = writer.Poll(/*wait=*/true);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->step, 4);
  EXPECT_EQ(done->bytes, std::filesystem::file_size(Shard(4)));
  EXPECT_GE(done->write_seconds, done->stood_seconds);
  EXPECT_FALSE(writer.in_flight());
  const auto loaded = Load(4, state);
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(torch::equal(loaded[i].second, before[i])) << loaded[i].first;
  // The same bytes as a save in place of that state.
  const std::string in_place = JoinPath(dir_, "in-place");
  NamedTensors same;
  for (size_t i = 0; i < state.size(); ++i) same.emplace_back(state[i].first, before[i]);
  SaveCheckpoint(in_place, spec_, {4, 32, 0xABCull}, same, 5);
  EXPECT_EQ(testing::ReadFileBytes(Shard(4)),
            testing::ReadFileBytes(JoinPath(StepDir(in_place, 4), "shard-00000-of-00001.bin")));
  EXPECT_EQ(testing::ReadFileBytes(Manifest(4)), testing::ReadFileBytes(JoinPath(StepDir(in_place, 4), "manifest.json")));
  // One arena: each tensor at a multiple of 256 bytes, the whole in pages.
  EXPECT_EQ(writer.host_bytes(), static_cast<uint64_t>(kPinnedPieceBytes + 4096 + 4096));
}

TEST_F(AsyncSaveTest, AStepCountsOnlyOnceCompletedAndTheOldOnesArePrunedThen) {
  NamedTensors state = RandomState(torch::kCPU);
  AsyncCheckpointWriter writer(dir_, spec_, /*keep=*/1, {}, false);
  ASSERT_FALSE(writer.Begin({2, 16, 1}, state));
  ASSERT_TRUE(writer.Poll(/*wait=*/true));
  ASSERT_FALSE(writer.Begin({4, 32, 1}, state));
  // The manifest is written by the poll that completes the step, never by
  // the writer's thread: until then step 2 is the newest and is kept.
  EXPECT_EQ(LatestCompleteStep(dir_), 2);
  std::optional<AsyncCheckpointWriter::Completed> done;
  for (int i = 0; i < 100000 && !done; ++i) {
    done = writer.Poll(/*wait=*/false);
    if (!done) {
      EXPECT_EQ(LatestCompleteStep(dir_), 2);
    }
  }
  ASSERT_TRUE(done) << "the write never finished";
  EXPECT_EQ(LatestCompleteStep(dir_), 4);
  EXPECT_FALSE(PathExists(StepDir(dir_, 2))) << "keep = 1 prunes step 2 once 4 is complete";
}

TEST_F(AsyncSaveTest, ASaveBegunWhileAnotherIsInFlightCompletesThatOneFirst) {
  NamedTensors state = RandomState(torch::kCPU);
  AsyncCheckpointWriter writer(dir_, spec_, 5, {}, false);
  writer.Prepare(state);  // the arena, made beside the first steps
  ASSERT_FALSE(writer.Begin({2, 16, 1}, state));
  const uint64_t copy_bytes = writer.host_bytes();
  EXPECT_GE(copy_bytes, static_cast<uint64_t>(kPinnedPieceBytes));
  for (auto& [name, t] : state) t.mul_(2);
  const auto second_state = Clones(state);
  const auto first = writer.Begin({3, 24, 1}, state);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->step, 2);
  EXPECT_GT(first->arena_seconds, 0);
  EXPECT_TRUE(PathExists(Manifest(2)));
  const auto second = writer.Poll(/*wait=*/true);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->arena_seconds, 0) << "the arena's time is said once";
  EXPECT_EQ(writer.host_bytes(), copy_bytes) << "the host copy is reused, not added to";
  const auto loaded = Load(3, state);
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(torch::equal(loaded[i].second, second_state[i])) << loaded[i].first;
}

TEST_F(AsyncSaveTest, AFailedWriteNamesTheShardAndTheLastCheckpointStays) {
  NamedTensors state = RandomState(torch::kCPU);
  AsyncCheckpointWriter writer(dir_, spec_, 5, {}, false);
  ASSERT_FALSE(writer.Begin({2, 16, 1}, state));
  ASSERT_TRUE(writer.Poll(/*wait=*/true));
  // A directory where the shard's temporary file would go: its open fails.
  MakeDirs(Shard(4) + ".tmp");
  ASSERT_FALSE(writer.Begin({4, 32, 1}, state));
  try {
    writer.Poll(/*wait=*/true);
    ADD_FAILURE() << "a failed write completed";
  } catch (const TrainError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("checkpoint step 4 written behind the steps failed on 1 of 1 rank: "),
              std::string::npos)
        << what;
    EXPECT_NE(what.find(Shard(4) + ".tmp: cannot create"), std::string::npos) << what;
    EXPECT_NE(what.find("the step is left incomplete"), std::string::npos) << what;
  }
  EXPECT_FALSE(writer.in_flight());
  EXPECT_EQ(LatestCompleteStep(dir_), 2);
  EXPECT_FALSE(PathExists(Manifest(4)));
}

TEST_F(AsyncSaveTest, AWriterDestroyedMidSaveLeavesTheStepIncomplete) {
  NamedTensors state = RandomState(torch::kCPU);
  {
    AsyncCheckpointWriter writer(dir_, spec_, 5, {}, false);
    ASSERT_FALSE(writer.Begin({6, 48, 1}, state));
  }  // the rank fails before the step completes
  EXPECT_EQ(LatestCompleteStep(dir_), -1);
  EXPECT_FALSE(PathExists(Manifest(6)));
  EXPECT_FALSE(PathExists(Shard(6) + ".tmp")) << "an abandoned shard's temporary file stays";
}

TEST_F(AsyncSaveTest, AnAbandonedSaveStaysIncompleteAndTheNextCompleteStepPrunesIt) {
  NamedTensors state = RandomState(torch::kCPU);
  CheckpointPruner pruner;
  AsyncCheckpointWriter writer(dir_, spec_, /*keep=*/1, {}, false, &pruner);
  ASSERT_FALSE(writer.Begin({2, 16, 1}, state));
  ASSERT_TRUE(writer.Poll(/*wait=*/true));
  ASSERT_FALSE(writer.Begin({4, 32, 1}, state));
  EXPECT_EQ(writer.step_in_flight(), 4);
  EXPECT_EQ(writer.Abandon(), std::optional<int64_t>(4));
  EXPECT_FALSE(writer.in_flight());
  EXPECT_EQ(writer.step_in_flight(), -1);
  EXPECT_EQ(writer.Abandon(), std::nullopt) << "nothing left to abandon";
  EXPECT_FALSE(writer.Poll(/*wait=*/true));
  EXPECT_EQ(LatestCompleteStep(dir_), 2);
  EXPECT_FALSE(PathExists(Manifest(4)));
  EXPECT_FALSE(PathExists(Shard(4) + ".tmp"));
  // The run's last checkpoint, written in place: step 2 goes (keep = 1),
  // and so does the abandoned step 4's directory.
  SaveCheckpoint(dir_, spec_, {5, 40, 1}, state, 1, {}, &pruner);
  pruner.Wait();
  EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"step-00000005"});
}

TEST(AsyncSaveNote, SaysTheStepTheTimesTheBytesAndTheRate) {
  EXPECT_EQ(DescribeSaveBehind({20, 3ull << 30, 2.0, 0.05}),
            "checkpoint step 20 written behind the steps in 2.0 s: 3.00 GiB (1.50 GiB/s, "
            "checksums and fsync included); the steps waited 0.05 s for it");
  EXPECT_EQ(DescribeSaveBehind({20, 3ull << 30, 2.0, 0.05, 1.25}).substr(137),
            "; its host copy's memory took 1.2 s to make");
  EXPECT_EQ(DescribeSaveBehind({20, 3ull << 30, 2.0, 0.05, 0, 0.125}).substr(137),
            "; the copy to host memory took 0.12 s (25.8 GB/s)");
}

// On a GPU the copy goes on a stream of its own: it must see what the
// current stream wrote before Begin, and the current stream's next writes
// must wait for it (BeforeStateChanges), without the host waiting. A
// transposed tensor is copied as it is laid out; an abandoned save leaves
// the next one whole.
TEST_F(AsyncSaveTest, DeviceStateIsCopiedAfterItsLastWriteAndBeforeItsNext) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  NamedTensors state = RandomState(torch::kCUDA);
  state.emplace_back("param.transposed", torch::randn({64, 48}, torch::kCUDA).t());
  torch::NoGradGuard no_grad;
  // Queued on the current stream just before the save: a chain of kernels
  // long enough that a copy not ordered after it would read older values.
  for (int i = 0; i < 20; ++i)
    for (auto& [name, t] : state)
      if (t.is_floating_point()) t.mul_(1.5).add_(1);
  AsyncCheckpointWriter writer(dir_, spec_, 5, {}, /*cuda=*/true);
  ASSERT_FALSE(writer.Begin({2, 16, 1}, state));
  writer.BeforeStateChanges();
  const auto want = Clones(state);  // on the current stream: after the copy's wait
  for (auto& [name, t] : state) t.mul_(-1);  // the next optimizer step
  ASSERT_TRUE(writer.Poll(/*wait=*/true));
  const auto loaded = Load(2, state);
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(torch::equal(loaded[i].second, want[i].cpu())) << loaded[i].first;
  EXPECT_GT(writer.host_bytes(), static_cast<uint64_t>(kPinnedPieceBytes));

  // Abandoned as it begins: the steps go on, and the next save copies the
  // state whole.
  ASSERT_FALSE(writer.Begin({3, 24, 1}, state));
  EXPECT_EQ(writer.Abandon(), 3);
  writer.BeforeStateChanges();
  for (auto& [name, t] : state) t.add_(1);
  ASSERT_FALSE(writer.Begin({4, 32, 1}, state));
  writer.BeforeStateChanges();
  const auto want4 = Clones(state);
  for (auto& [name, t] : state) t.mul_(-1);
  ASSERT_TRUE(writer.Poll(/*wait=*/true));
  const auto loaded4 = Load(4, state);
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(torch::equal(loaded4[i].second, want4[i].cpu())) << loaded4[i].first;
}

// A step's small reads to the host (its figures, the ranks' flags, the
// expert counts) are written by a kernel through the host memory's mapping:
// the same values as a copy, for every dtype and layout.
TEST(ReadToHostTest, GivesTheTensorsValuesForEachDtypeAndLayout) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA);
  for (const auto& device : devices)
    for (auto dtype :
         {torch::kFloat, torch::kDouble, torch::kLong, torch::kInt, torch::kBFloat16}) {
      const auto t = (torch::randn({3, 5}) * 100).to(dtype).to(device).t();  // not contiguous
      const auto got = compat::ReadToHost(t);
      EXPECT_TRUE(got.device().is_cpu()) << device << " " << dtype;
      EXPECT_EQ(got.sizes(), t.sizes()) << device << " " << dtype;
      EXPECT_TRUE(torch::equal(got, t.cpu())) << device << " " << dtype;
    }
}

#ifdef TRELLIS_TORCH_CUDA
// ... and so do not wait behind a checkpoint's copy to host memory on
// another stream, as a cudaMemcpy to the host does (it queues on the copy
// engine behind the whole copy).
TEST(ReadToHostTest, ReturnsWhileAnotherStreamsCopyToTheHostIsInFlight) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t bytes = int64_t{4} << 30;  // 70 ms at PCIe speed; a mapped read takes far less
  const auto big = torch::ones({bytes}, torch::dtype(torch::kByte).device(torch::kCUDA));
  auto host = torch::empty({bytes}, torch::dtype(torch::kByte).pinned_memory(true));
  const auto small = torch::arange(8, torch::dtype(torch::kFloat).device(torch::kCUDA));
  compat::ReadToHost(small);  // its pinned memory made before the copy begins
  torch::cuda::synchronize();
  auto side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAEvent copied;
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    host.copy_(big, /*non_blocking=*/true);
    copied.record(side);
  }
  const auto got = compat::ReadToHost(small);
  const bool still_copying = !copied.query();
  copied.synchronize();
  EXPECT_TRUE(torch::equal(got, small.cpu()));
  EXPECT_TRUE(still_copying) << "the read waited for the 4 GiB copy to the host";
  EXPECT_EQ(host[bytes - 1].item<uint8_t>(), 1);
}
#endif

}  // namespace
}  // namespace trellis::train
