#include "worker/core/rank_layout.h"

#include <gtest/gtest.h>

namespace trellis::worker {
namespace {

RankLayoutInput TwoRanksOnSecondNode() {
  RankLayoutInput in;
  in.launch = {"run-1", 2, 3};
  in.go.node_index = 1;
  in.go.rank_offset = 2;
  in.go.ranks_per_node = 2;
  in.go.world_size = 4;
  in.go.master_addr = "node1";
  in.go.master_port = 29500;
  in.go.resume_step = 100;
  in.go.checkpoint_dir = "/out/run-1/checkpoints";
  in.go.data_roots = {"/data", "/scratch/corpora"};
  in.go.mtbf_s = 4500000.4;
  in.spec_ranks_per_node = 2;
  in.gpus_per_node = 0;
  in.worker_env = {{"PATH", "/usr/bin"}, {"HOME", "/home/u"}};
  in.run_dir = "/out/run-1";
  in.socket_dir = "/tmp/trellis-abc";
  return in;
}

TEST(RankLayoutTest, ContractForEveryRank) {
  auto plans = PlanRanks(TwoRanksOnSecondNode());
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 2u);
  const RankPlan& r = (*plans)[1];
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.global_rank, 3);
  EXPECT_EQ(r.step_socket, "/tmp/trellis-abc/rank-3.sock");
  EXPECT_EQ(r.log_path, "/out/run-1/attempt-2/launch-3/rank-3.log");
  const EnvMap expected = {
      {"PATH", "/usr/bin"},
      {"HOME", "/home/u"},
      {"RANK", "3"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"MASTER_ADDR", "node1"},
      {"MASTER_PORT", "29500"},
      {"TRELLIS_RUN", "run-1"},
      {"TRELLIS_ATTEMPT", "2"},
      {"TRELLIS_LAUNCH", "3"},
      {"TRELLIS_STEP_SOCKET", "/tmp/trellis-abc/rank-3.sock"},
      {"TRELLIS_CHECKPOINT_DIR", "/out/run-1/checkpoints"},
      {"TRELLIS_RESUME_STEP", "100"},
      {"TRELLIS_DATA_ROOTS", "/data\n/scratch/corpora"},
      {"TRELLIS_MTBF_S", "4500000.400"},
      {"OMP_NUM_THREADS", "1"},
      {"OPENBLAS_NUM_THREADS", "1"},
      {"NCCL_MAX_CTAS", "16"},
      {"MIMALLOC_ALLOW_THP", "0"},
  };
  EXPECT_EQ(r.env, expected);
  RankLayoutInput unknown = TwoRanksOnSecondNode();
  unknown.go.mtbf_s = 0;  // a controller that sent none: the trainer's default
  EXPECT_EQ(PlanRanks(unknown)->at(0).env.count("TRELLIS_MTBF_S"), 0u);
  EXPECT_EQ((*plans)[0].env.at("RANK"), "2");
  EXPECT_EQ((*plans)[0].env.at("LOCAL_RANK"), "0");
}

// No data roots in the GO (an older controller): no variable, nothing checked.
TEST(RankLayoutTest, NoDataRootsSetsNoVariable) {
  RankLayoutInput in = TwoRanksOnSecondNode();
  in.go.data_roots.clear();
  auto plans = PlanRanks(in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].env.count("TRELLIS_DATA_ROOTS"), 0u);
}

struct EnvCase {
  const char* name;
  int gpus_per_node;
  EnvMap worker_env;
  EnvMap spec_env;
  int local_rank;
  const char* var;
  const char* expected;  // nullptr: not set
};

void PrintTo(const EnvCase& c, std::ostream* os) { *os << c.name; }

class RankEnvTest : public ::testing::TestWithParam<EnvCase> {};

TEST_P(RankEnvTest, Value) {
  const EnvCase& c = GetParam();
  RankLayoutInput in = TwoRanksOnSecondNode();
  in.gpus_per_node = c.gpus_per_node;
  in.worker_env = c.worker_env;
  in.spec_env = c.spec_env;
  auto plans = PlanRanks(in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const EnvMap& env = (*plans)[c.local_rank].env;
  auto it = env.find(c.var);
  if (c.expected == nullptr) {
    EXPECT_EQ(it, env.end()) << c.var << "=" << it->second;
  } else {
    ASSERT_NE(it, env.end()) << c.var;
    EXPECT_EQ(it->second, c.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, RankEnvTest,
    ::testing::Values(
        EnvCase{"NoGpusNoDevices", 0, {}, {}, 1, "CUDA_VISIBLE_DEVICES", nullptr},
        EnvCase{"NoGpusKeepsInherited",
                0,
                {{"CUDA_VISIBLE_DEVICES", "7"}},
                {},
                1,
                "CUDA_VISIBLE_DEVICES",
                "7"},
        EnvCase{"GpuIsLocalRank", 4, {}, {}, 1, "CUDA_VISIBLE_DEVICES", "1"},
        EnvCase{"GpuFromSlurmList",
                4,
                {{"CUDA_VISIBLE_DEVICES", "4,5,6,7"}},
                {},
                1,
                "CUDA_VISIBLE_DEVICES",
                "5"},
        EnvCase{"ShortSlurmListFallsBack",
                4,
                {{"CUDA_VISIBLE_DEVICES", "4"}},
                {},
                1,
                "CUDA_VISIBLE_DEVICES",
                "1"},
        EnvCase{"OmpDefaultsToOne", 0, {}, {}, 0, "OMP_NUM_THREADS", "1"},
        EnvCase{"OmpInheritedIsReplaced",
                0,
                {{"OMP_NUM_THREADS", "64"}},
                {},
                0,
                "OMP_NUM_THREADS",
                "1"},
        EnvCase{"OmpFromSpec",
                0,
                {{"OMP_NUM_THREADS", "64"}},
                {{"OMP_NUM_THREADS", "8"}},
                0,
                "OMP_NUM_THREADS",
                "8"},
        EnvCase{"OpenblasFollowsOmp", 0, {}, {}, 1, "OPENBLAS_NUM_THREADS", "1"},
        EnvCase{"OpenblasInheritedIsReplaced",
                0,
                {{"OPENBLAS_NUM_THREADS", "64"}, {"OMP_NUM_THREADS", "64"}},
                {},
                0,
                "OPENBLAS_NUM_THREADS",
                "1"},
        EnvCase{"OpenblasFollowsSpecOmp",
                0,
                {{"OPENBLAS_NUM_THREADS", "64"}},
                {{"OMP_NUM_THREADS", "8"}},
                0,
                "OPENBLAS_NUM_THREADS",
                "8"},
        EnvCase{"OpenblasFromSpec",
                0,
                {},
                {{"OMP_NUM_THREADS", "8"}, {"OPENBLAS_NUM_THREADS", "2"}},
                0,
                "OPENBLAS_NUM_THREADS",
                "2"},
        EnvCase{"SpecOverridesWorker", 0, {{"FOO", "a"}}, {{"FOO", "b"}}, 0, "FOO", "b"},
        EnvCase{"NcclCtasDefault", 0, {{"NCCL_MAX_CTAS", "32"}}, {}, 0, "NCCL_MAX_CTAS", "16"},
        EnvCase{"NcclCtasFromSpec", 0, {}, {{"NCCL_MAX_CTAS", "8"}}, 0, "NCCL_MAX_CTAS", "8"},
        EnvCase{"MimallocThpOff", 0, {}, {}, 1, "MIMALLOC_ALLOW_THP", "0"},
        EnvCase{"ContractOverridesAll", 0, {{"RANK", "99"}}, {{"RANK", "98"}}, 0, "RANK", "2"},
        EnvCase{"ResumeStep", 0, {}, {}, 0, "TRELLIS_RESUME_STEP", "100"}),
    [](const auto& info) { return std::string(info.param.name); });

struct BadCase {
  const char* name;
  void (*mutate)(RankLayoutInput*);
  const char* message;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class RankLayoutBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(RankLayoutBadTest, NamesTheProblem) {
  RankLayoutInput in = TwoRanksOnSecondNode();
  GetParam().mutate(&in);
  auto plans = PlanRanks(in);
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find(GetParam().message), std::string::npos) << plans.status();
}

INSTANTIATE_TEST_SUITE_P(
    Table, RankLayoutBadTest,
    ::testing::Values(BadCase{"ZeroRanks", [](RankLayoutInput* in) { in->go.ranks_per_node = 0; },
                              "ranks_per_node must be in [1, 1024]"},
                      BadCase{"SpecDisagrees",
                              [](RankLayoutInput* in) { in->spec_ranks_per_node = 4; },
                              "differs from the spec's slurm.ranks_per_node 4"},
                      BadCase{"NegativeOffset",
                              [](RankLayoutInput* in) { in->go.rank_offset = -1; },
                              "rank_offset must be >= 0"},
                      BadCase{"BeyondWorld", [](RankLayoutInput* in) { in->go.world_size = 3; },
                              "ranks [2, 4) do not fit world_size 3"},
                      BadCase{"NoMaster", [](RankLayoutInput* in) { in->go.master_addr.clear(); },
                              "master_addr is empty"},
                      BadCase{"BadPort", [](RankLayoutInput* in) { in->go.master_port = 70000; },
                              "master_port must be in [1, 65535]"},
                      BadCase{"BadResume", [](RankLayoutInput* in) { in->go.resume_step = -2; },
                              "resume_step must be >= -1"}),
    [](const auto& info) { return std::string(info.param.name); });

struct SocketCase {
  int ranks_per_node;
  int sockets;
  std::vector<int> expected;  // socket index per local rank
};

class SocketForRankTest : public ::testing::TestWithParam<SocketCase> {};

TEST_P(SocketForRankTest, SpreadsEvenly) {
  const SocketCase& c = GetParam();
  std::vector<int> got;
  for (int i = 0; i < c.ranks_per_node; ++i)
    got.push_back(SocketIndexForRank(i, c.ranks_per_node, c.sockets));
  EXPECT_EQ(got, c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, SocketForRankTest,
    ::testing::Values(SocketCase{4, 4, {0, 1, 2, 3}}, SocketCase{8, 4, {0, 0, 1, 1, 2, 2, 3, 3}},
                      SocketCase{2, 4, {0, 2}}, SocketCase{1, 4, {0}}, SocketCase{3, 2, {0, 0, 1}},
                      SocketCase{6, 4, {0, 0, 1, 2, 2, 3}}, SocketCase{4, 1, {0, 0, 0, 0}}));

TEST(RankLayoutTest, BindsEachRankToItsSocketWithNumactl) {
  RankLayoutInput in = TwoRanksOnSecondNode();
  in.socket_nodes = {0, 1, 2, 3};
  in.numactl = "/usr/bin/numactl";
  auto plans = PlanRanks(in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].numa_node, 0);
  EXPECT_EQ((*plans)[0].argv_prefix,
            (std::vector<std::string>{"/usr/bin/numactl", "--cpunodebind=0", "--membind=0"}));
  EXPECT_EQ((*plans)[1].numa_node, 2);
  EXPECT_EQ((*plans)[1].argv_prefix,
            (std::vector<std::string>{"/usr/bin/numactl", "--cpunodebind=2", "--membind=2"}));
}

TEST(RankLayoutTest, UsesTheSocketsNodeIdsNotTheirIndexes) {
  RankLayoutInput in = TwoRanksOnSecondNode();
  in.socket_nodes = {1, 3};
  in.numactl = "numactl";
  auto plans = PlanRanks(in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].numa_node, 1);
  EXPECT_EQ((*plans)[1].numa_node, 3);
}

TEST(RankLayoutTest, NoBindingOnOneSocketOrWithoutNumactl) {
  RankLayoutInput in = TwoRanksOnSecondNode();
  in.socket_nodes = {0};
  in.numactl = "/usr/bin/numactl";
  EXPECT_FALSE(WantsNumaBinding(in));
  auto plans = PlanRanks(in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].numa_node, -1);
  EXPECT_TRUE((*plans)[0].argv_prefix.empty());

  in.socket_nodes = {0, 1};
  in.numactl.clear();
  EXPECT_TRUE(WantsNumaBinding(in));
  plans = PlanRanks(in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[1].numa_node, -1);
  EXPECT_TRUE((*plans)[1].argv_prefix.empty());
}

}  // namespace
}  // namespace trellis::worker
