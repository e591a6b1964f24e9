#include "controller/core/gate_policy.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

SocketProbe Socket(int node, double free_gib, double unattributed_gib) {
  SocketProbe s;
  s.numa_node = node;
  s.total_bytes = static_cast<int64_t>(119.7 * kGiB);
  s.free_bytes = static_cast<int64_t>(free_gib * kGiB);
  s.unattributed_bytes = static_cast<int64_t>(unattributed_gib * kGiB);
  return s;
}

TEST(JudgeNodeTest, HealthyGh200NodePassesScoredByItsWorstSocket) {
  NodeProbe p;
  for (int i = 0; i < 4; ++i) p.sockets.push_back(Socket(i, 108.0 - i, 8.0));
  auto v = JudgeNode("node1", p, GatePolicy{});
  EXPECT_TRUE(v.passed);
  EXPECT_TRUE(v.reasons.empty());
  EXPECT_NEAR(v.score / kGiB, 105.0, 1e-6);
}

TEST(JudgeNodeTest, ReportsEveryFailingSocketInHumanTerms) {
  NodeProbe p;
  p.sockets = {Socket(0, 108, 8), Socket(1, 100.7, 39.9), Socket(2, 72.7, 10.9)};
  auto v = JudgeNode("node3", p, GatePolicy{});
  EXPECT_FALSE(v.passed);
  ASSERT_EQ(v.reasons.size(), 2u);
  EXPECT_EQ(v.reasons[0], "socket 1: 39.9 GiB unattributed > 24.0 GiB allowed");
  EXPECT_EQ(v.reasons[1], "socket 2: 72.7 GiB free < 100.0 GiB required");
}

TEST(JudgeNodeTest, ProbeErrorsAndEmptyProbesFail) {
  NodeProbe p;
  p.error = "node0/meminfo: MemFree missing";
  auto v = JudgeNode("n", p, GatePolicy{});
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.reasons[0], "probe failed: node0/meminfo: MemFree missing");
  EXPECT_FALSE(JudgeNode("n", NodeProbe{}, GatePolicy{}).passed);
}

TEST(JudgeNodeTest, TouchProbeFigureDecidesWhenRequested) {
  GatePolicy policy;
  policy.touch_probe = true;
  NodeProbe p;
  p.sockets = {Socket(0, 108, 8)};
  EXPECT_EQ(JudgeNode("n", p, policy).reasons[0],
            "socket 0: touch probe requested but not reported");
  p.sockets[0].touch_obtainable_bytes = static_cast<int64_t>(90 * kGiB);
  auto v = JudgeNode("n", p, policy);
  EXPECT_EQ(v.reasons[0], "socket 0: touch probe obtained 90.0 GiB < 100.0 GiB required");
  p.sockets[0].touch_obtainable_bytes = static_cast<int64_t>(104 * kGiB);
  v = JudgeNode("n", p, policy);
  EXPECT_TRUE(v.passed);
  EXPECT_NEAR(v.score / kGiB, 104.0, 1e-6);
}

}  // namespace
}  // namespace trellis::controller
