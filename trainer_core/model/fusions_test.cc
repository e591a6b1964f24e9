#include "trainer_core/model/fusions.h"

#include <gtest/gtest.h>

#include "trainer_core/error.h"

namespace trellis::train {
namespace {

TEST(FusionsTest, EveryFusionIsOnUnlessNamed) {
  Fusions f = ParseFusionsOff("");
  EXPECT_TRUE(f.moe_kernels && f.chunked_ce && f.bf16_weights);
  EXPECT_EQ(DescribeFusionsOff(f), "");
}

TEST(FusionsTest, NamedFusionsAreOffAndOthersStayOn) {
  Fusions f = ParseFusionsOff(" chunked_ce, bf16_weights,");
  EXPECT_TRUE(f.moe_kernels);
  EXPECT_FALSE(f.chunked_ce);
  EXPECT_FALSE(f.bf16_weights);
  EXPECT_EQ(DescribeFusionsOff(f), "chunked_ce,bf16_weights");
}

TEST(FusionsTest, AllTurnsEveryFusionOff) {
  EXPECT_EQ(DescribeFusionsOff(ParseFusionsOff("all")),
            "moe_kernels,chunked_ce,bf16_weights,muon_update,swiglu,rope,sdpa_gqa,"
            "gate_up_gemm,ce_kernel,expert_wgrad,rms_norm,cross_layer_norm,qkv_dgrad_sum,"
            "clip_in_momentum,ns_apply");
}

TEST(FusionsTest, AnUnknownNameIsRefusedWithTheAcceptedOnes) {
  try {
    ParseFusionsOff("moe_kernels,ropes");
    FAIL() << "accepted an unknown fusion";
  } catch (const TrainError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown fusion 'ropes'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chunked_ce"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trellis::train
