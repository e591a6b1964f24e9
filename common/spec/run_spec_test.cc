#include "common/spec/run_spec.h"

#include <cstdint>
#include <cstdio>

#include <gtest/gtest.h>

namespace trellis::spec {
namespace {

const char* kGood = R"(
[job]
name = "hello"
command = "echo hi"
[slurm]
nodes = 2
ranks_per_node = 2
time_limit = "01:30:00"
extra_args = ["--qos=normal", "--exclusive"]
[env]
NCCL_MAX_CTAS = "8"
)";

TEST(RunSpecTest, ParsesAGoodSpec) {
  FieldErrors errors;
  auto s = ParseRunSpec(kGood, &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->job.name, "hello");
  EXPECT_EQ(s->job.command, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(s->slurm.nodes, 2);
  EXPECT_EQ(s->world_size(), 4);
  EXPECT_EQ(s->slurm.time_limit_minutes, 90);
  EXPECT_EQ(s->env.at("NCCL_MAX_CTAS"), "8");
  EXPECT_FALSE(s->has_model);
}

TEST(RunSpecTest, CommandArrayIsArgv) {
  FieldErrors errors;
  auto s = ParseRunSpec("[job]\nname='a'\ncommand=['/bin/echo','x y']\n", &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->job.command, (std::vector<std::string>{"/bin/echo", "x y"}));
}

TEST(RunSpecTest, ModelModeHasNoCommand) {
  FieldErrors errors;
  auto s = ParseRunSpec("[job]\nname='m'\n[model]\nlayers=2\n[training]\nsteps=5\n", &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_TRUE(s->has_model);
  EXPECT_EQ(s->trainer.training.steps, 5);
}

struct BadSpec {
  std::string toml;
  std::string field_and_message;  // substring of JoinErrors
};

// A stable, unique, short test name (gtest would print the struct's bytes,
// pointers included): the field, and a digest of the case (FNV-1a).
void PrintTo(const BadSpec& c, std::ostream* os) {
  uint32_t h = 2166136261u;
  for (char ch : c.toml + c.field_and_message) h = (h ^ static_cast<unsigned char>(ch)) * 16777619u;
  char digest[9];
  std::snprintf(digest, sizeof digest, "%08x", h);
  *os << c.field_and_message.substr(0, c.field_and_message.find(':')) << "_" << digest;
}

class RunSpecBadInputTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(RunSpecBadInputTest, NamesTheFieldAndWhatIsAccepted) {
  FieldErrors errors;
  EXPECT_FALSE(ParseRunSpec(GetParam().toml, &errors));
  std::string all = JoinErrors(errors);
  EXPECT_NE(all.find(GetParam().field_and_message), std::string::npos) << all;
}

const std::string kJob = "[job]\nname='x'\ncommand='true'\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, RunSpecBadInputTest,
    ::testing::Values(
        BadSpec{kJob + "[slurm]\nnodez=2\n",
                "slurm.nodez: unknown key (did you mean nodes?); accepted keys:"},
        BadSpec{kJob + "[colour]\nx=1\n", "colour: unknown section"},
        BadSpec{kJob + "[slurm]\nnodes='2'\n", "slurm.nodes: must be an integer in [1, 16384], got a string"},
        BadSpec{kJob + "[slurm]\nnodes=0\n", "slurm.nodes: must be an integer in [1, 16384], got 0"},
        BadSpec{kJob + "[slurm]\nnodes=-3\n", "got -3"},
        BadSpec{kJob + "[slurm]\nnodes=1000000\n", "got 1000000"},
        BadSpec{"[job]\nname='x'\ncommand=''\n", "job.command: must be a non-empty string"},
        BadSpec{"[job]\nname='x'\ncommand=[]\n", "job.command: must be a non-empty string or a non-empty array"},
        BadSpec{"[job]\nname='x'\n", "job.command: a spec needs exactly one of [job].command (generic mode) or a [model] section; it has neither"},
        BadSpec{kJob + "[model]\nlayers=2\n", "it has both"},
        BadSpec{"[job]\nname='a/b'\ncommand='true'\n", "job.name: must match [a-z0-9-]{1,63}"},
        BadSpec{"[job]\nname='..'\ncommand='true'\n", "job.name: must match"},
        BadSpec{"[job]\nname='Hello'\ncommand='true'\n", "job.name: must match"},
        BadSpec{"[job]\ncommand='true'\n", "job.name: is required"},
        BadSpec{"[slurm]\nnodes=1\n", "job: section is required"},
        BadSpec{kJob + "output_dir='../escape'\n", "job.output_dir: must be a relative path"},
        BadSpec{kJob + "output_dir='/abs'\n", "job.output_dir: must be a relative path"},
        BadSpec{kJob + "[slurm]\nextra_args=['--uid=0']\n", "slurm.extra_args: entry 0 '--uid=0' is not an allowed sbatch option"},
        BadSpec{kJob + "[slurm]\nextra_args=['--nodes=9']\n", "is not an allowed sbatch option"},
        BadSpec{kJob + "[slurm]\ntime_limit='forever'\n", "slurm.time_limit: must be minutes"},
        BadSpec{kJob + "[env]\nRANK='3'\n", "env.RANK: is set by Trellis"},
        BadSpec{kJob + "[env]\nlower='3'\n", "env.lower: name must match"},
        BadSpec{kJob + "[training]\nsteps=3\n", "training: applies only to [model] runs"},
        BadSpec{"[job\nname=", "spec: TOML syntax error at line 1"},
        BadSpec{"[job]\nname='m'\n[model]\nexperts=4\n[slurm]\nnodes=2\nranks_per_node=2\n[training]\nglobal_batch=6\n",
                "training.global_batch: must be a multiple of the world size 4 (2 nodes x 2 ranks), got 6"},
        BadSpec{"[job]\nname='m'\n[model]\nexperts=4\n[slurm]\nnodes=1\nranks_per_node=2\n"
                "[training]\nglobal_batch=16\nmicro_batch=3\n",
                "training.micro_batch: 3 does not divide the 8 rows per rank (training.global_batch "
                "16 over the world size 2 (1 node x 2 ranks)); accepted: a divisor of 8"},
        BadSpec{"[job]\nname='m'\n[model]\nexperts=4\n[training]\nglobal_batch=4\nmicro_batch=5\n",
                "training.micro_batch: must be at most training.global_batch (4), got 5"},
        BadSpec{kJob + "[slurm]\nranks_per_node=4\ngpus_per_node=2\n", "slurm.ranks_per_node: must be <= slurm.gpus_per_node"},
        BadSpec{kJob + "[colour]\nx=1\n",
                "the sections are job, slurm, gate, restart, health, env"},
        BadSpec{kJob + "[restart]\nheartbeat_timeout_s=4\n", "restart.heartbeat_timeout_s: must be an integer in [5, 3600], got 4"},
        BadSpec{kJob + "[restart]\nheartbeat_timeout_s=3601\n", "restart.heartbeat_timeout_s: must be an integer in [5, 3600], got 3601"},
        BadSpec{kJob + "[restart]\nstartup_timeout_s=9\n", "restart.startup_timeout_s: must be an integer in [10, 604800], got 9"},
        BadSpec{kJob + "[restart]\nstartup_timeout_s=604801\n", "restart.startup_timeout_s: must be an integer in [10, 604800], got 604801"},
        BadSpec{kJob + "[restart]\nrelaunch_in_allocation='yes'\n", "restart.relaunch_in_allocation: must be true or false, got a string"},
        BadSpec{kJob + "[restart]\nbackoff_reset_s=-1\n", "restart.backoff_reset_s: must be an integer in [0, 604800], got -1"},
        BadSpec{kJob + "[restart]\nbackoff_reset_s=604801\n", "restart.backoff_reset_s: must be an integer in [0, 604800], got 604801"},
        BadSpec{kJob + "[restart]\nbackoff_reset_s='1h'\n", "restart.backoff_reset_s: must be an integer"},
        BadSpec{kJob + "[health]\nstraggler_window=2\n", "health.straggler_window: must be an integer in [3, 1000], got 2"},
        BadSpec{kJob + "[health]\nstraggler_window=1001\n", "health.straggler_window: must be an integer in [3, 1000], got 1001"},
        BadSpec{kJob + "[health]\nstraggler_min_slow=0\n", "health.straggler_min_slow: must be an integer in [1, 20], got 0 (at most health.straggler_window)"},
        BadSpec{kJob + "[health]\nstraggler_window=5\nstraggler_min_slow=6\n", "health.straggler_min_slow: must be an integer in [1, 5], got 6 (at most health.straggler_window)"},
        BadSpec{kJob + "[health]\nstraggler_factor=1.0\n", "health.straggler_factor: must be a number in [1.05, 100], got 1"},
        BadSpec{kJob + "[health]\nstraggler_factor=101\n", "health.straggler_factor: must be a number in [1.05, 100], got 101"},
        BadSpec{kJob + "[health]\nstraggler_strike=1\n", "health.straggler_strike: must be true or false, got an integer"},
        BadSpec{kJob + "[health]\nstraggler=1\n", "health.straggler: unknown key; accepted keys:"},
        BadSpec{kJob + "[restart]\nspare_pool_nodes=65\n", "restart.spare_pool_nodes: must be an integer in [0, 64], got 65"},
        BadSpec{kJob + "[restart]\nspare_pool_nodes=-1\n", "restart.spare_pool_nodes: must be an integer in [0, 64], got -1"},
        BadSpec{kJob + "[restart]\nspare_pool_nodes=1\nrelaunch_in_allocation=false\n", "restart.spare_pool_nodes: needs restart.relaunch_in_allocation = true (the pool's nodes join relaunches), got 1"},
        BadSpec{kJob + "[restart]\ncontinuation='before'\n", "restart.continuation: must be \"ahead\" or \"after\", got \"before\""},
        BadSpec{kJob + "[notify]\nwebhook='ftp://x'\n", "notify.webhook: must be an http:// or https:// URL, got 'ftp://x'"},
        BadSpec{kJob + "[notify]\non=['end','boom']\n", "notify.on: 'boom' is not an event; accepted: end, failure, restart, handoff"},
        BadSpec{kJob + "[restart]\ncontinuation_lead_s=29\n", "restart.continuation_lead_s: must be \"auto\" or seconds in [30, 86400]"},
        BadSpec{kJob + "[restart]\ncontinuation_lead_s=86401\n", "restart.continuation_lead_s: must be \"auto\" or seconds in [30, 86400]"},
        BadSpec{kJob + "[restart]\ncontinuation_lead_s='soon'\n", "restart.continuation_lead_s: must be \"auto\" or seconds in [30, 86400], got \"soon\""},
        BadSpec{kJob + "[restart]\ncontinuation_lead_s=1.5\n", "restart.continuation_lead_s: must be \"auto\" or seconds"},
        BadSpec{kJob + "[slurm]\ntime_limit=3\n[restart]\ncontinuation_lead_s=91\n", "restart.continuation_lead_s: must be at most half of slurm.time_limit (90 s), got 91"}));

TEST(RunSpecTest, ContinuationDefaultsAheadWithAnAutoLead) {
  FieldErrors errors;
  auto s = ParseRunSpec(kJob, &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->restart.continuation, "ahead");
  EXPECT_EQ(s->restart.continuation_lead_s, 0);  // auto
  s = ParseRunSpec(kJob + "[slurm]\ntime_limit=3\n[restart]\ncontinuation='after'\n"
                          "continuation_lead_s=90\n",
                   &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->restart.continuation, "after");
  EXPECT_EQ(s->restart.continuation_lead_s, 90);
  s = ParseRunSpec(kJob + "[restart]\ncontinuation_lead_s='auto'\n", &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->restart.continuation_lead_s, 0);
}

TEST(RunSpecTest, HealingKeysHaveDefaults) {
  FieldErrors errors;
  auto s = ParseRunSpec(kJob, &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->restart.hang_timeout_s, 600);
  EXPECT_EQ(s->restart.heartbeat_timeout_s, 30);
  EXPECT_EQ(s->restart.startup_timeout_s, 900);
  EXPECT_EQ(s->restart.backoff_reset_s, 3600);
  EXPECT_TRUE(s->restart.relaunch_in_allocation);
  EXPECT_EQ(s->health.straggler_window, 20);
  EXPECT_EQ(s->health.straggler_min_slow, 10);
  EXPECT_DOUBLE_EQ(s->health.straggler_factor, 1.5);
  EXPECT_FALSE(s->health.straggler_strike);
}

TEST(RunSpecTest, ParsesHealingKeys) {
  FieldErrors errors;
  auto s = ParseRunSpec(kJob +
                            "[restart]\nheartbeat_timeout_s=5\nstartup_timeout_s=604800\n"
                            "relaunch_in_allocation=false\nbackoff_reset_s=0\n"
                            "[health]\nstraggler_window=1000\nstraggler_min_slow=1000\n"
                            "straggler_factor=2\nstraggler_strike=true\n",
                        &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->restart.heartbeat_timeout_s, 5);
  EXPECT_EQ(s->restart.startup_timeout_s, 604800);
  EXPECT_FALSE(s->restart.relaunch_in_allocation);
  EXPECT_EQ(s->restart.backoff_reset_s, 0);
  EXPECT_EQ(s->health.straggler_window, 1000);
  EXPECT_EQ(s->health.straggler_min_slow, 1000);
  EXPECT_DOUBLE_EQ(s->health.straggler_factor, 2.0);
  EXPECT_TRUE(s->health.straggler_strike);
}

TEST(RunSpecTest, TheDefaultMinSlowFitsASmallWindow) {
  FieldErrors errors;
  auto s = ParseRunSpec(kJob + "[health]\nstraggler_window=5\n", &errors);
  ASSERT_TRUE(s) << JoinErrors(errors);
  EXPECT_EQ(s->health.straggler_min_slow, 5);
}

TEST(RunSpecTest, RefusesOversizedSpecBeforeParsing) {
  std::string big = kJob + "# " + std::string(10 << 20, 'x') + "\n";
  FieldErrors errors;
  EXPECT_FALSE(ParseRunSpec(big, &errors));
  EXPECT_NE(JoinErrors(errors).find("spec: is 10485"), std::string::npos) << JoinErrors(errors);
  EXPECT_NE(JoinErrors(errors).find("the limit is 1048576"), std::string::npos);
}

TEST(RunSpecTest, ReportsEveryBadFieldNotJustTheFirst) {
  FieldErrors errors;
  EXPECT_FALSE(ParseRunSpec("[job]\nname='A'\ncommand='x'\n[slurm]\nnodes=0\nspare_nodes=-1\n",
                            &errors));
  EXPECT_EQ(errors.size(), 3u) << JoinErrors(errors);
}

TEST(SafePathTest, Cases) {
  EXPECT_TRUE(IsSafeRelativePath("runs/a-1"));
  EXPECT_FALSE(IsSafeRelativePath("a/../b"));
  EXPECT_FALSE(IsSafeRelativePath("a//b"));
  EXPECT_FALSE(IsSafeRelativePath("./a"));
  EXPECT_FALSE(IsSafeRelativePath("a b"));
  EXPECT_FALSE(IsSafeRelativePath(""));
}

}  // namespace
}  // namespace trellis::spec
