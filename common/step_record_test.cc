#include "common/step_record.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(StepRecordTest, RoundTripsAllFields) {
  StepRecord r;
  r.step = 7;
  r.loss = 3.25;
  r.tokens = 4096;
  r.step_seconds = 0.5;
  r.grad_norm = 1.5;
  r.alloc_retries = 0;
  r.nccl_max_ctas = 16;
  r.checkpoint_step = 5;
  r.checkpoint_seconds = 2.5;
  r.expert_load_max_over_mean = 1.75;
  r.ep_load_max_over_mean = 1.125;
  r.mem_allocated_peak_fwd_bytes = int64_t{40} << 30;
  r.mem_allocated_peak_bwd_bytes = int64_t{48} << 30;
  r.mem_allocated_peak_optim_bytes = int64_t{32} << 30;
  std::string error;
  auto back = DecodeStepRecord(EncodeStepRecord(r), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->step, 7);
  EXPECT_DOUBLE_EQ(back->loss, 3.25);
  EXPECT_EQ(back->tokens, 4096);
  EXPECT_EQ(*back->grad_norm, 1.5);
  EXPECT_EQ(*back->nccl_max_ctas, 16);
  EXPECT_EQ(*back->checkpoint_step, 5);
  EXPECT_EQ(*back->checkpoint_seconds, 2.5);
  EXPECT_EQ(*back->expert_load_max_over_mean, 1.75);
  EXPECT_EQ(*back->ep_load_max_over_mean, 1.125);
  EXPECT_EQ(*back->mem_allocated_peak_fwd_bytes, int64_t{40} << 30);
  EXPECT_EQ(*back->mem_allocated_peak_bwd_bytes, int64_t{48} << 30);
  EXPECT_EQ(*back->mem_allocated_peak_optim_bytes, int64_t{32} << 30);
  EXPECT_FALSE(back->fwd_seconds.has_value());
}

struct BadCase {
  const char* line;
  const char* error_contains;
};

TEST(StepRecordTest, RefusesBadRecordsNamingTheField) {
  const BadCase cases[] = {
      {"not json", "one JSON object"},
      {"[1,2]", "one JSON object"},
      {R"({"step":1,"loss":1,"tokens":1,"step_seconds":1})", "v: must be 1"},
      {R"({"v":2,"step":1,"loss":1,"tokens":1,"step_seconds":1})", "v: must be 1"},
      {R"({"v":1,"loss":1,"tokens":1,"step_seconds":1})", "step: is required"},
      {R"({"v":1,"step":-1,"loss":1,"tokens":1,"step_seconds":1})", "step: must be an integer"},
      {R"({"v":1,"step":1.5,"loss":1,"tokens":1,"step_seconds":1})", "step: must be an integer"},
      {R"({"v":1,"step":1,"loss":"x","tokens":1,"step_seconds":1})", "loss: must be a number"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":-2})", "step_seconds"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":1,"extra":3})", "extra: unknown"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":1,"alloc_retries":-1})",
       "alloc_retries"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":1,"ep_load_max_over_mean":-1})",
       "ep_load_max_over_mean: must be finite and >= 0"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":1,"expert_load_max_over_mean":"2"})",
       "expert_load_max_over_mean: must be a number"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":1,"checkpoint_seconds":-0.5})",
       "checkpoint_seconds: must be finite and >= 0"},
      {R"({"v":1,"step":1,"loss":1,"tokens":1,"step_seconds":1,"mem_allocated_peak_bwd_bytes":1.5})",
       "mem_allocated_peak_bwd_bytes: must be an integer >= 0"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(DecodeStepRecord(c.line, &error)) << c.line;
    EXPECT_NE(error.find(c.error_contains), std::string::npos) << c.line << " -> " << error;
  }
}

TEST(StepRecordTest, RefusesOversizedLineWithoutParsing) {
  std::string line(kMaxStepRecordBytes + 1, ' ');
  std::string error;
  EXPECT_FALSE(DecodeStepRecord(line, &error));
  EXPECT_NE(error.find("limit"), std::string::npos);
}

}  // namespace
}  // namespace trellis
