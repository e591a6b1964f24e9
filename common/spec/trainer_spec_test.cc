#include "common/spec/trainer_spec.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace trellis::spec
