// `trellis report A B`: the runs on shared charts, one colour each, and the
// keys where their specs differ (defaults counted).
#include "cli/report/compare_page.h"

#include <gtest/gtest.h>

namespace trellis::cli::report {
namespace {

const char* kBase = R"([job]
name = "a"
command = "true"
[slurm]
nodes = 2
)";

v1::Run RunOf(const std::string& id, const std::string& spec) {
  v1::Run run;
  run.mutable_summary()->set_run_id(id);
  run.mutable_summary()->set_state(v1::RUN_STATE_SUCCEEDED);
  run.mutable_summary()->set_last_step(2);
  run.set_spec_toml(spec);
  return run;
}

v1::RunStepsResponse Steps(double loss0) {
  v1::RunStepsResponse r;
  for (int s = 1; s <= 2; ++s) {
    v1::StepPoint* p = r.add_points();
    p->set_step(s);
    p->set_loss(loss0 / s);
    p->set_tokens(1000);
    p->set_step_seconds_sum(0.5);
    p->set_step_seconds(0.5);
  }
  return r;
}

TEST(CompareTest, SpecDifferencesCountDefaults) {
  const std::string explicit_default = std::string(kBase) + "ranks_per_node = 1\n";
  const std::string other =
      std::string(kBase) + "ranks_per_node = 4\n[restart]\nmax_restarts = 2\n";
  EXPECT_TRUE(SpecDifferences({kBase, explicit_default}).empty())
      << "a default written out is the same spec";
  std::vector<SpecDifference> d = SpecDifferences({kBase, other});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].key, "restart.max_restarts");
  EXPECT_EQ(d[0].values, (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(d[1].key, "slurm.ranks_per_node");
  EXPECT_EQ(d[1].values, (std::vector<std::string>{"1", "4"}));
}

TEST(CompareTest, ThePageHasEveryRunOnSharedChartsAndTheirDifferences) {
  std::vector<ComparedRun> runs = {
      {RunOf("a-1", kBase), Steps(5.0)},
      {RunOf("b-2", std::string(kBase) + "ranks_per_node = 4\n"), Steps(4.0)},
      {RunOf("c-3", kBase), std::nullopt}};
  const std::string page = RenderComparison(runs, 1700000000000, /*utc=*/true);
  for (const char* want : {"<title>trellis report: a-1, b-2, c-3</title>", "Runs compared",
                           "<code>a-1</code>", "<code>b-2</code>", "id=\"loss\"",
                           "id=\"tokens\"", "id=\"step-time\"", "slurm.ranks_per_node",
                           "no step history from the controller for c-3", "#1565c0",
                           "#c62828"})
    EXPECT_NE(page.find(want), std::string::npos) << want;
  EXPECT_EQ(page.find("http://"), std::string::npos) << "nothing loaded from anywhere";
}

}  // namespace
}  // namespace trellis::cli::report
