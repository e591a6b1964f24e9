#include "common/spec/trainer_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace trellis::spec {
namespace {

TEST(TrainerSpecTest, ReadsSectionsAndKeepsDefaults) {
  auto root = toml::parse(R"(
[model]
layers = 3
hidden = 96
heads = 6
kv_heads = 3
[training]
steps = 40
lr = 0.01
)");
  FieldErrors errors;
  TrainerSpec s = ParseTrainerSections(root, &errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  EXPECT_EQ(s.model.layers, 3);
  EXPECT_EQ(s.model.hidden, 96);
  EXPECT_EQ(s.training.steps, 40);
  EXPECT_DOUBLE_EQ(s.training.lr, 0.01);
  EXPECT_EQ(s.model.experts, ModelSpec{}.experts);
  EXPECT_TRUE(s.parallel.activation_checkpointing);
  EXPECT_EQ(s.parallel.expert_gather_dtype, "float32");
  EXPECT_EQ(s.parallel.prefetch_layers, 1);
  EXPECT_EQ(s.training.dtype, "auto");
  EXPECT_EQ(s.training.micro_batch, 0);  // all of a rank's rows in one forward
  EXPECT_FALSE(s.checkpoint.async);       // checkpoints written in place
}

TEST(TrainerSpecTest, DtypeTakesAutoAndTheTwoNames) {
  for (const char* dtype : {"auto", "float32", "bfloat16"}) {
    FieldErrors errors;
    TrainerSpec s = ParseTrainerSections(
        toml::parse(std::string("[training]\ndtype = \"") + dtype + "\"\n"), &errors);
    EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
    EXPECT_EQ(s.training.dtype, dtype);
  }
}

TEST(TrainerSpecTest, NamesTheFieldAndTheAcceptedRange) {
  auto root = toml::parse(R"(
[model]
layers = 0
hidden = "big"
colour = 3
)");
  FieldErrors errors;
  ParseTrainerSections(root, &errors);
  std::string all = JoinErrors(errors);
  EXPECT_NE(all.find("model.layers: must be an integer in [1, 512], got 0"), std::string::npos)
      << all;
  EXPECT_NE(all.find("model.hidden: must be an integer in [8, 65536], got a string"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("model.colour: unknown key"), std::string::npos) << all;
}

TEST(TrainerSpecTest, ReadsTrainerSettings) {
  auto root = toml::parse(R"(
[model]
rope_theta = 500000.0
shared_expert = true
[parallel]
activation_checkpointing = false
expert_gather_dtype = "fp8"
prefetch_layers = 0
[training]
warmup_steps = 7
global_batch = 16
micro_batch = 2
muon_lr = 0.01
muon_ns_dtype = "float32"
aux_loss_coef = 0
router_bias_rate = 0.001
dtype = "bfloat16"
device = "cpu"
grad_clip = 0
row_order = "cost_bands"
deterministic = true
[checkpoint]
at_end = false
async = true
async_keep_free_gib = 16.5
)");
  FieldErrors errors;
  TrainerSpec s = ParseTrainerSections(root, &errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  EXPECT_DOUBLE_EQ(s.model.rope_theta, 500000.0);
  EXPECT_TRUE(s.model.shared_expert);
  EXPECT_FALSE(s.parallel.activation_checkpointing);
  EXPECT_EQ(s.parallel.expert_gather_dtype, "fp8");
  EXPECT_EQ(s.parallel.prefetch_layers, 0);
  EXPECT_EQ(s.training.warmup_steps, 7);
  EXPECT_EQ(s.training.global_batch, 16);
  EXPECT_EQ(s.training.micro_batch, 2);
  EXPECT_DOUBLE_EQ(s.training.muon_lr, 0.01);
  EXPECT_EQ(s.training.muon_ns_dtype, "float32");
  EXPECT_DOUBLE_EQ(s.training.aux_loss_coef, 0);
  EXPECT_DOUBLE_EQ(s.training.router_bias_rate, 0.001);
  EXPECT_EQ(s.training.dtype, "bfloat16");
  EXPECT_FALSE(s.checkpoint.at_end);
  EXPECT_TRUE(s.checkpoint.async);
  EXPECT_DOUBLE_EQ(s.checkpoint.async_keep_free_gib, 16.5);
  EXPECT_EQ(s.training.device, "cpu");
  EXPECT_DOUBLE_EQ(s.training.grad_clip, 0);
  EXPECT_EQ(s.training.row_order, "cost_bands");
  EXPECT_TRUE(s.training.deterministic);
}

TEST(TrainerSpecTest, CrossFieldAndChoiceErrorsNameTheField) {
  auto root = toml::parse(R"(
[model]
hidden = 40
heads = 8
experts = 6
[parallel]
ep = 4
grad_reduce_dtype = "float16"
activation_checkpointing = "yes"
expert_gather_dtype = "e5m2"
[training]
dtype = "float16"
muon_momentum = 1.5
row_order = "sorted"
deterministic = 1
[checkpoint]
async_keep_free_gib = -1
)");
  FieldErrors errors;
  ParseTrainerSections(root, &errors);
  std::string all = JoinErrors(errors);
  EXPECT_NE(all.find("model.heads: must leave an even head size for RoPE (model.hidden / "
                     "model.heads = 5)"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("model.heads: must divide"), std::string::npos) << all;
  EXPECT_NE(all.find("parallel.ep: must divide model.experts (6)"), std::string::npos) << all;
  EXPECT_NE(
      all.find("parallel.grad_reduce_dtype: must be one of bfloat16, float32, got \"float16\""),
      std::string::npos)
      << all;
  EXPECT_NE(all.find("parallel.activation_checkpointing: must be true or false, got a string"), std::string::npos)
      << all;
  EXPECT_NE(all.find("parallel.expert_gather_dtype: must be one of float32, bfloat16, fp8, got "
                     "\"e5m2\""),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("training.row_order: must be one of shuffled, cost_bands, got \"sorted\""),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("training.dtype: must be one of auto, float32, bfloat16, got \"float16\""),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checkpoint.async_keep_free_gib: must be a number in [0, 65536], got -1"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("training.muon_momentum: must be a number in [0, 0.9999], got 1.5"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("training.deterministic: must be true or false, got an integer"),
            std::string::npos)
      << all;
}

// Layers in flight are bounded: 0 (no prefetch) to 8.
TEST(TrainerSpecTest, PrefetchLayersIsZeroToEight) {
  for (const char* bad : {"9", "-1", "1.5"}) {
    FieldErrors errors;
    ParseTrainerSections(toml::parse(std::string("[parallel]\nprefetch_layers = ") + bad),
                         &errors);
    std::string all = JoinErrors(errors);
    EXPECT_NE(all.find("parallel.prefetch_layers: must be an integer in [0, 8], got "),
              std::string::npos)
        << all;
  }
  FieldErrors errors;
  auto s = ParseTrainerSections(toml::parse("[parallel]\nprefetch_layers = 8"), &errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  EXPECT_EQ(s.parallel.prefetch_layers, 8);
}

// What the spec alone can say about micro_batch; whether it divides each
// rank's rows needs the world (model_fit_test).
TEST(TrainerSpecTest, MicroBatchIsAtMostTheGlobalBatch) {
  auto parse = [](const std::string& training) {
    FieldErrors errors;
    ParseTrainerSections(toml::parse("[training]\n" + training), &errors);
    return JoinErrors(errors);
  };
  EXPECT_EQ(parse("global_batch = 8\nmicro_batch = 8\n"), "");
  EXPECT_EQ(parse("global_batch = 8\nmicro_batch = 0\n"), "");
  EXPECT_EQ(parse("global_batch = 8\nmicro_batch = 9\n"),
            "training.micro_batch: must be at most training.global_batch (8), got 9");
  EXPECT_EQ(parse("micro_batch = -1\n"),
            "training.micro_batch: must be an integer in [0, 1048576], got -1");
  EXPECT_NE(parse("micro_batch = 1.5\n").find("training.micro_batch: must be an integer"),
            std::string::npos);
}

// Groups must be equal and give a token the same number of experts each; how
// they sit on the expert-parallel ranks needs the world (model_fit_test).
TEST(TrainerSpecTest, ExpertGroupsDivideTheExpertsAndTheExpertsPerToken) {
  auto parse = [](const std::string& model) {
    FieldErrors errors;
    auto s = ParseTrainerSections(toml::parse("[model]\n" + model), &errors);
    return std::make_pair(s.model.expert_groups, JoinErrors(errors));
  };
  EXPECT_EQ(parse("experts = 8\nexperts_per_token = 4\nexpert_groups = 4\n"),
            std::make_pair(4, std::string()));
  EXPECT_EQ(parse("experts = 8\nexperts_per_token = 2\n"), std::make_pair(1, std::string()));
  const std::string why =
      " and model.experts_per_token (2), so every group is the same size and gives a token the "
      "same number of experts; got ";
  EXPECT_EQ(parse("experts = 8\nexperts_per_token = 2\nexpert_groups = 4\n").second,
            "model.expert_groups: must divide model.experts (8)" + why + "4");
  EXPECT_EQ(parse("experts = 6\nexperts_per_token = 2\nexpert_groups = 4\n").second,
            "model.expert_groups: must divide model.experts (6)" + why + "4");
  EXPECT_NE(parse("expert_groups = 0\n").second.find(
                "model.expert_groups: must be an integer in [1, 4096], got 0"),
            std::string::npos);
}

TEST(TrainerSpecTest, OffloadFractionIsAFractionAndNeedsCheckpointing) {
  auto parse = [](const std::string& parallel) {
    FieldErrors errors;
    auto s = ParseTrainerSections(toml::parse("[parallel]\n" + parallel), &errors);
    return std::make_pair(s.parallel.offload_fraction, JoinErrors(errors));
  };
  EXPECT_EQ(parse(""), std::make_pair(0.0, std::string()));
  EXPECT_EQ(parse("offload_fraction = 0.86\n"), std::make_pair(0.86, std::string()));
  EXPECT_EQ(parse("offload_fraction = 1\n"), std::make_pair(1.0, std::string()));
  EXPECT_NE(parse("offload_fraction = 1.5\n").second.find(
                "parallel.offload_fraction: must be a number in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_EQ(parse("offload_fraction = 0.5\nactivation_checkpointing = false\n").second,
            "parallel.offload_fraction: needs parallel.activation_checkpointing = true (what is "
            "offloaded is the layer input checkpointing keeps); accepted with checkpointing off: 0");
  EXPECT_EQ(parse("offload_fraction = 0\nactivation_checkpointing = false\n").second, "");
}

TEST(TrainerSpecTest, EveryStepsTakesACountOrAuto) {
  auto parse = [](const std::string& checkpoint) {
    FieldErrors errors;
    auto s = ParseTrainerSections(toml::parse("[checkpoint]\n" + checkpoint), &errors);
    return std::make_pair(s.checkpoint, JoinErrors(errors));
  };
  auto [count, ok] = parse("every_steps = 50\n");
  EXPECT_EQ(ok, "");
  EXPECT_EQ(count.every_steps, 50);
  EXPECT_FALSE(count.every_steps_auto);
  auto [none, ok2] = parse("");
  EXPECT_FALSE(none.every_steps_auto || none.every_steps > 0);
  EXPECT_DOUBLE_EQ(none.auto_min_s, 60);
  EXPECT_DOUBLE_EQ(none.auto_max_s, 14400);
  auto [automatic, ok3] = parse("every_steps = \"auto\"\nasync = true\nauto_min_s = 2\n");
  EXPECT_EQ(ok3, "");
  EXPECT_TRUE(automatic.every_steps_auto);
  EXPECT_EQ(automatic.every_steps, 0);
  EXPECT_TRUE(automatic.SavesBehindTheSteps());  // its checkpoints go behind the steps too
  EXPECT_DOUBLE_EQ(automatic.auto_min_s, 2);

  const std::string accepted =
      "checkpoint.every_steps: must be \"auto\" or a step count in [0, 2^40] (0: only at the end)";
  EXPECT_EQ(parse("every_steps = \"often\"\n").second, accepted + ", got \"often\"");
  EXPECT_EQ(parse("every_steps = -1\n").second, accepted);
  EXPECT_EQ(parse("every_steps = 2.5\n").second, accepted);
  EXPECT_EQ(parse("auto_min_s = 600\nauto_max_s = 300\n").second,
            "checkpoint.auto_min_s: must be at most checkpoint.auto_max_s (300 s)");
  EXPECT_NE(parse("auto_max_s = 0\n").second.find(
                "checkpoint.auto_max_s: must be a number in [1, 604800], got 0"),
            std::string::npos);
}

}  // namespace
}  // namespace trellis::spec
