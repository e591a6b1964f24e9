// key=value assignments over a spec: typed as TOML reads them or as the spec
// wants them, errors naming the assignment, and a suggestion for a misspelt key.
#include "common/spec/spec_overrides.h"

#include <gtest/gtest.h>

#include "common/spec/run_spec.h"

namespace trellis::spec {
namespace {

const char* kHello = R"(# a comment
[job]
name = "hello"
command = "echo hi"
[slurm]
nodes = 2
ranks_per_node = 2
)";

RunSpec Applied(const std::vector<std::string>& assignments) {
  FieldErrors errors;
  auto text = ApplyOverrides(kHello, assignments, &errors);
  EXPECT_TRUE(text) << JoinErrors(errors);
  if (!text) return {};
  auto spec = ParseRunSpec(*text, &errors);
  EXPECT_TRUE(spec) << JoinErrors(errors) << "\n" << *text;
  return spec ? *spec : RunSpec{};
}

TEST(SpecOverridesTest, ValuesAreTypedAsTheSpecWantsThem) {
  RunSpec s = Applied({"slurm.nodes=1", "restart.max_restarts=3", "gate.touch_probe=true",
                       "gate.min_free_gib_per_socket=50", "slurm.partition=gpu.large",
                       "job.command=python3 train.py --lr 1e-3", "env.NCCL_DEBUG=INFO",
                       "env.THREADS=8", "slurm.extra_args=[\"--qos=high\"]",
                       "slurm.time_limit=00:30:00"});
  EXPECT_EQ(s.slurm.nodes, 1);
  EXPECT_EQ(s.slurm.ranks_per_node, 2) << "untouched";
  EXPECT_EQ(s.restart.max_restarts, 3);
  EXPECT_TRUE(s.gate.touch_probe);
  EXPECT_DOUBLE_EQ(s.gate.min_free_gib_per_socket, 50);
  EXPECT_EQ(s.slurm.partition, "gpu.large");
  EXPECT_EQ(s.job.command[2], "python3 train.py --lr 1e-3");
  EXPECT_EQ(s.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(s.env.at("THREADS"), "8") << "a number where the spec wants a string";
  EXPECT_EQ(s.slurm.extra_args, std::vector<std::string>{"--qos=high"});
  EXPECT_EQ(s.slurm.time_limit_minutes, 30);
  EXPECT_EQ(Applied({"job.name=007"}).job.name, "007");
  EXPECT_EQ(Applied({"slurm.nodes=1", "slurm.nodes=3"}).slurm.nodes, 3) << "the last wins";
}

TEST(SpecOverridesTest, BadAssignmentsAreNamedWithWhatIsAccepted) {
  auto first_error = [](const std::vector<std::string>& assignments) {
    FieldErrors errors;
    EXPECT_FALSE(ApplyOverrides(kHello, assignments, &errors));
    return errors.empty() ? std::string() : JoinErrors(errors);
  };
  EXPECT_EQ(first_error({"nodes"}),
            "nodes: is not KEY=VALUE with a dotted key such as slurm.nodes=2 or "
            "env.NCCL_DEBUG=INFO");
  EXPECT_EQ(first_error({"slurm=2"}), "slurm=2: a key needs its section (SECTION.KEY=VALUE)");
  EXPECT_EQ(first_error({"nodes=1"}),
            "nodes=1: a key needs its section (SECTION.KEY=VALUE): did you mean slurm.nodes?");
  EXPECT_EQ(first_error({"lr=1e-3"}), "lr=1e-3: a key needs its section (SECTION.KEY=VALUE): "
                                      "did you mean training.lr?");
  EXPECT_EQ(first_error({"slurm.nodes.x=2"}),
            "slurm.nodes.x=2: slurm.nodes is a value, not a section");
  EXPECT_EQ(first_error({"sl urm.nodes=2"}).rfind("sl urm.nodes=2: is not KEY=VALUE", 0), 0u);

  // The spec's own checks, on the result: a range, a misspelt key.
  FieldErrors errors;
  auto text = ApplyOverrides(kHello, {"slurm.nodes=0", "slurm.nodez=2"}, &errors);
  ASSERT_TRUE(text);
  EXPECT_FALSE(ParseRunSpec(*text, &errors));
  const std::string all = JoinErrors(errors);
  EXPECT_NE(all.find("slurm.nodes: must be an integer in [1, 16384], got 0"), std::string::npos)
      << all;
  EXPECT_NE(all.find("slurm.nodez: unknown key (did you mean nodes?); accepted keys: "),
            std::string::npos)
      << all;
  errors.clear();
  text = ApplyOverrides(kHello, {"restrat.max_restarts=2"}, &errors);
  ASSERT_TRUE(text);
  EXPECT_FALSE(ParseRunSpec(*text, &errors));
  EXPECT_NE(JoinErrors(errors).find("restrat: unknown section (did you mean restart?)"),
            std::string::npos)
      << JoinErrors(errors);
}

TEST(SpecOverridesTest, NearestWordSuggestsOnlyNearMisses) {
  const std::vector<std::string> keys = {"nodes", "ranks_per_node", "partition", "account"};
  EXPECT_EQ(NearestWord("nodez", keys), "nodes");
  EXPECT_EQ(NearestWord("partiton", keys), "partition");
  EXPECT_EQ(NearestWord("rank_per_node", keys), "ranks_per_node");
  EXPECT_EQ(NearestWord("colour", keys), "");
  EXPECT_EQ(NearestWord("x", keys), "");
}

}  // namespace
}  // namespace trellis::spec
