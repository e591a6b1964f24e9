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

}  // namespace
}  // namespace trellis::spec
