#include "common/spec/model_fit.h"

#include <gtest/gtest.h>

namespace trellis::spec {
namespace {

TrainerSpec Tiny() {
  TrainerSpec t;
  t.model.experts = 4;
  t.training.global_batch = 16;
  return t;
}

std::string Check(const TrainerSpec& t, int nodes, int ranks) {
  FieldErrors errors;
  CheckModelFitsWorld(t, nodes, ranks, &errors);
  return errors.empty() ? "" : JoinErrors(errors);
}

TEST(CheckModelFitsWorld, DefaultsFitTwoNodesOfTwo) {
  EXPECT_EQ(Check(Tiny(), 2, 2), "");
  EXPECT_EQ(Check(Tiny(), 1, 1), "");
}

TEST(CheckModelFitsWorld, GlobalBatchMustSplitOverTheWorld) {
  auto t = Tiny();
  t.training.global_batch = 6;
  EXPECT_NE(Check(t, 2, 2).find("training.global_batch: must be a multiple of the world size 4 "
                                "(2 nodes x 2 ranks), got 6"),
            std::string::npos);
}

TEST(CheckModelFitsWorld, NodeSizeAndEpMustNest) {
  auto t = Tiny();
  t.parallel.node_size = 3;
  EXPECT_NE(Check(t, 2, 2).find("parallel.node_size: must divide the world size 4"),
            std::string::npos);
  t = Tiny();
  t.parallel.ep = 4;  // node_size defaults to 2 ranks per node
  EXPECT_NE(Check(t, 2, 2).find("parallel.ep: must divide parallel.node_size = 2"),
            std::string::npos);
}

TEST(CheckModelFitsWorld, ExpertsMustSplitOnExpertBoundaries) {
  auto t = Tiny();
  t.model.experts = 2;  // ep 2 over world 8: 1 expert per block, 4 ranks share it
  t.training.global_batch = 8;
  EXPECT_NE(Check(t, 4, 2).find("model.experts: model.experts / parallel.ep = 1"),
            std::string::npos);
  t.model.experts = 8;
  EXPECT_EQ(Check(t, 4, 2), "");
}

TEST(CheckModelFitsWorld, ExpertGroupsMustBeWholeOnEveryExpertParallelRank) {
  auto t = Tiny();  // 4 experts, ep defaults to the 2 ranks of a node
  t.model.experts_per_token = 4;
  t.model.expert_groups = 4;
  EXPECT_EQ(Check(t, 2, 2), "");  // two groups per rank
  t.model.expert_groups = 2;
  EXPECT_EQ(Check(t, 2, 2), "");  // one group per rank
  t.parallel.node_size = 4;       // ep 4 over 2 groups: half a group each
  t.model.experts = 8;
  EXPECT_EQ(Check(t, 1, 4),
            "model.expert_groups: 2 is not a multiple of the expert-parallel size 4 "
            "(parallel.ep): a group would straddle two ranks and the ranks' loads differ; "
            "accepted: 1 (plain top-k) or a multiple of 4 that divides model.experts and "
            "model.experts_per_token");
  t.model.expert_groups = 1;
  EXPECT_EQ(Check(t, 1, 4), "");
}

TEST(CheckModelFitsWorld, MicroBatchMustDivideTheRowsPerRank) {
  auto t = Tiny();  // global_batch 16
  t.training.micro_batch = 3;
  EXPECT_EQ(Check(t, 1, 2),
            "training.micro_batch: 3 does not divide the 8 rows per rank (training.global_batch 16 "
            "over the world size 2 (1 node x 2 ranks)); accepted: a divisor of 8, or 0 (all 8 "
            "rows in one forward)");
  t.training.micro_batch = 8;  // divides 16, but not the 4 rows of each of 4 ranks
  EXPECT_NE(Check(t, 2, 2).find("training.micro_batch: 8 does not divide the 4 rows per rank"),
            std::string::npos);
  for (int ok : {0, 1, 2, 4}) {
    t.training.micro_batch = ok;
    EXPECT_EQ(Check(t, 2, 2), "") << ok;
  }
  // A global batch that does not split over the world is the one error.
  t.training.global_batch = 6;
  t.training.micro_batch = 4;
  EXPECT_EQ(Check(t, 2, 2).find("training.micro_batch"), std::string::npos);
  t.training.micro_batch = 2;  // the 2 rows of each of 3 ranks
  EXPECT_EQ(MicroBatchMismatch(t.training, 3, "world 3"), "");
}

}  // namespace
}  // namespace trellis::spec
