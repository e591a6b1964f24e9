#include "common/spec/run_spec.h"

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
        BadSpec{kJob + "[slurm]\nnodez=2\n", "slurm.nodez: unknown key; accepted keys:"},
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
        BadSpec{kJob + "[slurm]\nranks_per_node=4\ngpus_per_node=2\n", "slurm.ranks_per_node: must be <= slurm.gpus_per_node"}));

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
