// The activation offload's arena (memory/activation_offload.h) on the CPU:
// inputs come back as they went out, the arena is the offloaded layers'
// slots, and misuse is a clear error (part of fsdp_test).
#include "trainer_core/memory/activation_offload.h"

#include <gtest/gtest.h>

#include <string>

#include "trainer_core/error.h"

namespace trellis::train {
namespace {

TEST(ActivationOffloadTest, OffloadedLayersRoundDown) {
  EXPECT_EQ(OffloadedLayers(0.86, 74), 63);  // the production report's setting
  EXPECT_EQ(OffloadedLayers(0.5, 4), 2);
  EXPECT_EQ(OffloadedLayers(0.3, 10), 3);
  EXPECT_EQ(OffloadedLayers(0.24, 4), 0);
  EXPECT_EQ(OffloadedLayers(1, 8), 8);
  EXPECT_EQ(OffloadedLayers(0, 8), 0);
}

TEST(ActivationOffloadTest, InputsComeBackAsTheyWentOut) {
  ActivationOffload offload(3, torch::kCPU);
  EXPECT_TRUE(offload.Offloads(0));
  EXPECT_TRUE(offload.Offloads(2));
  EXPECT_FALSE(offload.Offloads(3));
  EXPECT_EQ(offload.arena_bytes(), 0);
  std::vector<torch::Tensor> inputs;
  for (int step = 0; step < 2; ++step) {  // slots reused by the next micro-batch
    inputs.clear();
    for (int layer = 0; layer < 3; ++layer) {
      inputs.push_back(torch::randn({2, 5, 7}).to(torch::kBFloat16));
      offload.Store(layer, inputs.back());
    }
    // 2 x 5 x 7 bf16 = 140 bytes, a page per slot.
    EXPECT_EQ(offload.arena_bytes(), 3 * 4096);
    for (int layer = 2; layer >= 0; --layer) {
      offload.Prefetch(layer - 1);  // what backward does: the next one ahead
      auto x = offload.Take(layer);
      EXPECT_EQ(x.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(x, inputs[static_cast<size_t>(layer)])) << "layer " << layer;
    }
  }
}

// A fetch never taken (a backward that stopped early) does not outlive the
// next Store of its layer.
TEST(ActivationOffloadTest, AStoreReplacesAFetchNeverTaken) {
  ActivationOffload offload(1, torch::kCPU);
  offload.Store(0, torch::full({3}, 1.0));
  offload.Prefetch(0);
  offload.Store(0, torch::full({3}, 2.0));
  EXPECT_TRUE(torch::equal(offload.Take(0), torch::full({3}, 2.0)));
}

TEST(ActivationOffloadTest, MisuseIsAClearError) {
  ActivationOffload offload(2, torch::kCPU);
  EXPECT_THROW(offload.Take(0), c10::Error);  // nothing stored yet
  offload.Store(0, torch::zeros({4, 8}));
  try {
    offload.Store(1, torch::zeros({4, 9}));
    ADD_FAILURE() << "an input of another shape was stored";
  } catch (const TrainError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the arena's slots of [4, 8] Float"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(offload.Store(2, torch::zeros({4, 8})), c10::Error);  // layer 2 stays
}

// An arena larger than the memory this rank may take is refused before it
// is touched, naming the bound (an input of 1 PiB, seen through expand:
// the tensor itself holds 4 bytes).
TEST(ActivationOffloadTest, AnArenaThatCannotFitIsRefusedNamingTheBound) {
  ActivationOffload offload(2, torch::kCPU);
  const auto huge = torch::zeros({1}).expand({int64_t{1} << 48});
  try {
    offload.Store(0, huge);
    ADD_FAILURE() << "a 2 PiB arena was made";
  } catch (const TrainError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("activation offload: the host arena for 2 layers' inputs does not fit: "),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(" available of "), std::string::npos) << m;
    EXPECT_NE(m.find("lower parallel.offload_fraction"), std::string::npos) << m;
  }
  EXPECT_EQ(offload.arena_bytes(), 0);
}

}  // namespace
}  // namespace trellis::train
