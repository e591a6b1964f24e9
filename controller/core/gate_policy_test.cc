#include "controller/core/gate_policy.h"

#include <gtest/gtest.h>

#include "common/model_layout/rank_host_memory.h"

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

// A [model] run's ranks take host memory of their own (checkpoint.async's
// copy): a socket with less free than the minimum plus that of the ranks
// bound to it passes, but the node is marked short of it, socket by socket.
TEST(JudgeNodeTest, ASocketShortOfItsRanksHostMemoryPassesMarkedShort) {
  GatePolicy policy;
  policy.rank_host_bytes = static_cast<int64_t>(10 * kGiB);
  policy.rank_host_what = "checkpoint.async's copy of the state 10.00 GiB";
  NodeProbe p;
  for (int i = 0; i < 4; ++i) p.sockets.push_back(Socket(i, 108, 8));
  // 4 ranks on 4 sockets: one each, 110 GiB wanted everywhere.
  policy.ranks_per_node = 4;
  auto v = JudgeNode("n", p, policy);
  EXPECT_TRUE(v.passed);
  EXPECT_TRUE(v.reasons.empty());
  ASSERT_EQ(v.short_of_ranks_memory.size(), 4u);
  EXPECT_EQ(v.short_of_ranks_memory[3],
            "socket 3: 108.0 GiB free < 110.0 GiB with the ranks' host memory (100.0 GiB + 1 "
            "rank x 10.0 GiB: checkpoint.async's copy of the state 10.00 GiB)");
  EXPECT_NEAR(v.score / kGiB, 108.0, 1e-6);
  // 2 ranks on 4 sockets are bound to sockets 0 and 2 (as the worker binds).
  policy.ranks_per_node = 2;
  v = JudgeNode("n", p, policy);
  ASSERT_EQ(v.short_of_ranks_memory.size(), 2u);
  EXPECT_EQ(v.short_of_ranks_memory[0].rfind("socket 0: ", 0), 0u);
  EXPECT_EQ(v.short_of_ranks_memory[1].rfind("socket 2: ", 0), 0u);
  // 8 ranks: two on each socket, 120 GiB each; the touch probe's figure
  // where it is asked for.
  policy.ranks_per_node = 8;
  policy.touch_probe = true;
  for (auto& s : p.sockets) s.touch_obtainable_bytes = static_cast<int64_t>(130 * kGiB);
  p.sockets[1].free_bytes = static_cast<int64_t>(125 * kGiB);
  p.sockets[1].touch_obtainable_bytes = static_cast<int64_t>(115 * kGiB);
  v = JudgeNode("n", p, policy);
  EXPECT_TRUE(v.passed);
  ASSERT_EQ(v.short_of_ranks_memory.size(), 1u);
  EXPECT_EQ(v.short_of_ranks_memory[0],
            "socket 1: 115.0 GiB obtainable < 120.0 GiB with the ranks' host memory (100.0 GiB + "
            "2 ranks x 10.0 GiB: checkpoint.async's copy of the state 10.00 GiB)");
  // One socket (no binding): all of a node's ranks count on it.
  NodeProbe one;
  one.sockets = {Socket(0, 145, 8)};
  policy.touch_probe = false;
  policy.ranks_per_node = 4;
  EXPECT_TRUE(JudgeNode("n", one, policy).short_of_ranks_memory.empty());
  policy.ranks_per_node = 8;
  EXPECT_EQ(JudgeNode("n", one, policy).short_of_ranks_memory.size(), 1u);
  // Below the minimum itself: a failure as ever, not also "short".
  one.sockets[0].free_bytes = static_cast<int64_t>(90 * kGiB);
  v = JudgeNode("n", one, policy);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.reasons[0], "socket 0: 90.0 GiB free < 100.0 GiB required");
  EXPECT_TRUE(v.short_of_ranks_memory.empty());
}

spec::RunSpec ParseSpec(const std::string& toml) {
  spec::FieldErrors errors;
  auto s = spec::ParseRunSpec(toml, &errors);
  EXPECT_TRUE(s.has_value()) << spec::JoinErrors(errors);
  return s.value_or(spec::RunSpec{});
}

TEST(GatePolicyForTest, AModelRunWithCheckpointsBehindTheStepsCountsTheirCopy) {
  const std::string base =
      "[job]\nname = \"m\"\n[slurm]\nnodes = 2\nranks_per_node = 2\n"
      "[gate]\nmin_free_gib_per_socket = 50\ntimeout_s = 30\n[model]\nlayers = 2\n"
      "[training]\nglobal_batch = 8\n"
      "[checkpoint]\nevery_steps = 10\n";
  GatePolicy in_place = GatePolicyFor(ParseSpec(base));
  EXPECT_EQ(in_place.min_free_gib_per_socket, 50.0);
  EXPECT_EQ(in_place.timeout, std::chrono::seconds(30));
  EXPECT_EQ(in_place.rank_host_bytes, 0);
  GatePolicy behind = GatePolicyFor(ParseSpec(base + "async = true\n"));
  EXPECT_EQ(behind.rank_host_bytes, spec::CheckpointStateBytes(spec::ModelSpec{}, 4));
  EXPECT_EQ(behind.ranks_per_node, 2);
  EXPECT_EQ(behind.rank_host_what.rfind("checkpoint.async's copy of the state ", 0), 0u);
  // A [job] run's command is the user's: nothing known of it.
  EXPECT_EQ(GatePolicyFor(ParseSpec("[job]\nname = \"j\"\ncommand = \"true\"\n"))
                .rank_host_bytes,
            0);
}

}  // namespace
}  // namespace trellis::controller
