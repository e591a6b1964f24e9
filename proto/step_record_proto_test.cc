#include "proto/step_record_proto.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(StepRecordProtoTest, StepRecordRoundTripKeepsAbsentOptionalsAbsent) {
  StepRecord r;
  r.step = 7;
  r.loss = 2.5;
  r.tokens = 4096;
  r.step_seconds = 0.25;
  r.grad_norm = 1.5;
  r.alloc_retries = 0;  // present though zero
  r.checkpoint_step = 6;
  r.expert_load_max_over_mean = 1.25;  // a MoE record without EP (no ep_load_max_over_mean)
  r.checkpoint_seconds = 0.0;  // present though zero
  v1::StepRecord p;
  ToProto(r, &p);
  EXPECT_FALSE(p.has_fwd_seconds());
  EXPECT_TRUE(p.has_checkpoint_seconds());
  EXPECT_EQ(p.expert_load_max_over_mean(), 1.25);
  EXPECT_FALSE(p.has_ep_load_max_over_mean());
  EXPECT_TRUE(p.has_alloc_retries());
  StepRecord back = FromProto(p);
  EXPECT_EQ(EncodeStepRecord(back), EncodeStepRecord(r));
  EXPECT_FALSE(back.fwd_seconds);
  EXPECT_EQ(back.alloc_retries, 0);
  EXPECT_EQ(back.checkpoint_seconds, 0.0);
  EXPECT_FALSE(back.ep_load_max_over_mean);
  p.set_mem_allocated_peak_bwd_bytes(int64_t{5} << 30);
  EXPECT_EQ(FromProto(p).mem_allocated_peak_bwd_bytes, int64_t{5} << 30);
  EXPECT_FALSE(FromProto(p).mem_allocated_peak_fwd_bytes);
  p.set_ep_load_max_over_mean(1.0);
  EXPECT_EQ(FromProto(p).ep_load_max_over_mean, 1.0);
  p.clear_checkpoint_seconds();
  EXPECT_FALSE(FromProto(p).checkpoint_seconds);
}

}  // namespace
}  // namespace trellis
