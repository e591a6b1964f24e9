#include "controller/core/doctor_rules.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using V = CheckLine::Verdict;

bool Says(const CheckLine& l, const std::string& text) {
  return l.detail.find(text) != std::string::npos;
}

TEST(DoctorRulesTest, SlurmCommandsNameWhatIsMissingAndWhere) {
  CheckLine ok = SlurmCommandsLine({}, "PATH", "slurm-wlm 22.05.8");
  EXPECT_EQ(ok.verdict, V::kOk);
  EXPECT_TRUE(
      Says(ok, "sbatch, squeue, scontrol, sinfo, srun, scancel in PATH (slurm-wlm 22.05.8)"));
  CheckLine bad = SlurmCommandsLine({"sbatch", "srun"}, "/opt/slurm/bin", "");
  EXPECT_EQ(bad.verdict, V::kFail);
  EXPECT_TRUE(Says(bad, "sbatch, srun not found in /opt/slurm/bin")) << bad.detail;
  EXPECT_TRUE(Says(bad, "--slurm-bin-dir"));
}

TEST(DoctorRulesTest, SlurmctldUpOrWhatPingSaid) {
  EXPECT_EQ(SlurmctldLine({0, "Slurmctld(primary) at vm is UP\n", "", false}).verdict, V::kOk);
  CheckLine down = SlurmctldLine(
      {1,
       "Slurmctld(primary) at vm is DOWN\n*****************************************\n"
       "** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n",
       "", false});
  EXPECT_EQ(down.verdict, V::kFail);
  EXPECT_TRUE(Says(down, "scontrol ping: Slurmctld(primary) at vm is DOWN;")) << down.detail;
  EXPECT_EQ(SlurmctldLine({137, "", "", true}).verdict, V::kFail);
}

TEST(DoctorRulesTest, MungeAndTheSocketFromSlurmsConfig) {
  AuthConfig a = ParseAuthConfig(
      "AuthAltTypes            = (null)\n"
      "AuthInfo                = socket=/tmp/c/munge.sock,ttl=60\n"
      "AuthType                = auth/munge\n");
  EXPECT_EQ(a.type, "auth/munge");
  EXPECT_EQ(a.socket, "/tmp/c/munge.sock");
  EXPECT_EQ(MungeLine({0, "", "", false}, a.socket).verdict, V::kOk);
  CheckLine bad = MungeLine(
      {1, "", "unmunge: Error: Failed to access \"/tmp/c/munge.sock\": No such file\n", false},
      a.socket);
  EXPECT_EQ(bad.verdict, V::kFail);
  EXPECT_TRUE(Says(bad, "Failed to access")) << bad.detail;
  EXPECT_TRUE(Says(bad, "munged must run"));
}

TEST(DoctorRulesTest, PartitionsWithTheirDefaultStateAndGpus) {
  auto seen = ParsePartitions(
      "debug*|up|2|(null)\ndebug*|up|2|(null)\ngpu|up|8|gpu:h100:4(S:0-1)\nold|down|1|gpu:2\n");
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[0].is_default);
  EXPECT_EQ(seen[0].nodes, 4) << "two lines of one partition add up";
  EXPECT_EQ(seen[1].gpus_per_node, 4);
  std::optional<PartitionSeen> chosen;
  CheckLine def = PartitionLine("", seen, &chosen);
  EXPECT_EQ(def.verdict, V::kOk);
  EXPECT_TRUE(Says(def, "debug (Slurm's default): up, 4 node(s)")) << def.detail;
  CheckLine gpu = PartitionLine("gpu", seen, &chosen);
  EXPECT_TRUE(Says(gpu, "4 GPU(s) each")) << gpu.detail;
  EXPECT_EQ(chosen->gpus_per_node, 4);
  CheckLine none = PartitionLine("nope", seen, &chosen);
  EXPECT_EQ(none.verdict, V::kFail);
  EXPECT_TRUE(Says(none, "'nope' is not a partition here; the partitions: debug*, gpu, old"))
      << none.detail;
  EXPECT_EQ(PartitionLine("old", seen, &chosen).verdict, V::kFail);
}

TEST(DoctorRulesTest, AccountsOnlyWithAccounting) {
  EXPECT_EQ(AccountLine("a", std::vector<SlurmAssociation>{}, false).verdict, V::kSkip);
  std::vector<SlurmAssociation> mine = {{"proj1", {}}, {"proj2", {}}};
  EXPECT_EQ(AccountLine("", mine, true).verdict, V::kOk);
  EXPECT_EQ(AccountLine("proj2", mine, true).verdict, V::kOk);
  CheckLine bad = AccountLine("proj9", mine, true);
  EXPECT_EQ(bad.verdict, V::kFail);
  EXPECT_TRUE(Says(bad, "proj1, proj2")) << bad.detail;
  EXPECT_EQ(AccountLine("", std::vector<SlurmAssociation>{}, true).verdict, V::kFail);
}

TEST(DoctorRulesTest, TheNodesLinesAreNamedAndAWrongVersionFails) {
  CommandResult ran{0,
                    "node=node3\n"
                    "{\"check\":\"worker\",\"verdict\":\"ok\",\"detail\":\"trellis-worker 0.1.0 at "
                    "/x/trellis-worker on vm\"}\n"
                    "{\"check\":\"numa\",\"verdict\":\"FAIL\",\"detail\":\"cannot read\"}\n",
                    "", false};
  auto lines = NodeLines(ran, "/x/trellis-worker", "debug", "0.1.0");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].name, "node node3: worker");
  EXPECT_EQ(lines[0].verdict, V::kOk);
  EXPECT_EQ(lines[1].name, "node node3: numa");
  EXPECT_EQ(lines[1].verdict, V::kFail);
  auto older = NodeLines(ran, "/x/trellis-worker", "debug", "0.2.0");
  EXPECT_EQ(older[0].verdict, V::kFail);
  EXPECT_TRUE(Says(older[0], "not this controller's version 0.2.0")) << older[0].detail;
}

TEST(DoctorRulesTest, AnSrunThatRanNoCheckSaysWhy) {
  auto missing = NodeLines({127, "node=node2\n", "sh: 1: exec: /x/trellis-worker: not found\n",
                            false},
                           "/x/trellis-worker", "debug", "0.1.0");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].name, "node node2");
  EXPECT_TRUE(Says(missing[0], "could not run /x/trellis-worker")) << missing[0].detail;
  EXPECT_TRUE(Says(missing[0], "not found"));
  auto refused = NodeLines({1, "", "srun: error: invalid partition specified: nope\n", false},
                           "/x/trellis-worker", "nope", "0.1.0");
  EXPECT_TRUE(Says(refused[0], "srun on partition nope failed: srun: error: invalid partition"))
      << refused[0].detail;
  auto waited = NodeLines({137, "", "", true}, "/x/trellis-worker", "", "0.1.0");
  EXPECT_TRUE(Says(waited[0], "no compute node of the default partition")) << waited[0].detail;
}

}  // namespace
}  // namespace trellis::controller
