#include "cli/render_launches.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cli/format.h"

namespace trellis::cli {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;  // 2023-11-14 22:13:20 UTC

constexpr char kSpec[] = R"([job]
name = "tiny"
command = "python3 train.py"

[slurm]
nodes = 4
ranks_per_node = 2

[restart]
max_restarts = 3
)";

v1::Launch* AddLaunch(v1::Run* run, int attempt, int launch, std::vector<std::string> nodes,
                      int64_t started, int64_t ended, const std::string& cls, int exit_code,
                      const std::string& recovery) {
  v1::Launch* l = run->add_launches();
  l->set_attempt(attempt);
  l->set_launch(launch);
  for (auto& n : nodes) l->add_nodes(n);
  l->set_started_unix_ms(started);
  l->set_ended_unix_ms(ended);
  l->set_failure_class(cls);
  l->set_exit_code(exit_code);
  l->set_recovery(recovery);
  return l;
}

// Attempt 1: node3 goes silent, the controller relaunches on the allocation's
// spare, and the second launch succeeds. A straggler was seen on node3 first.
v1::Run RelaunchedRun() {
  v1::Run run;
  auto* s = run.mutable_summary();
  s->set_run_id("tiny-7");
  s->set_state(v1::RUN_STATE_SUCCEEDED);
  s->set_nodes(4);
  s->set_ranks_per_node(2);
  s->set_attempts(1);
  s->set_last_step(-1);
  s->set_restarts(1);
  s->set_relaunches(1);
  s->set_restart_attempts(0);
  run.set_spec_toml(kSpec);
  auto* lost = AddLaunch(&run, 1, 1, {"node1", "node2", "node3", "node4"}, kT0 + 10'000,
                         kT0 + 202'000, "node_lost", 1, "relaunch");
  lost->set_blamed_node("node3");
  lost->set_reason("node node3 lost: worker silent for 45 s");
  lost->set_evidence_json(R"({"step_exit_code":1,"lost_nodes":["node3"],"silent_s":{"node3":45.2},)"
                          R"("class":"node_lost"})");
  auto* ok = AddLaunch(&run, 1, 2, {"node1", "node2", "node4", "node5"}, kT0 + 240'000,
                       kT0 + 900'000, "succeeded", 0, "succeed");
  ok->set_reason("all 8 ranks exited 0");
  ok->set_evidence_json(R"({"step_exit_code":0,"ranks":8,"class":"succeeded"})");
  auto* h = run.add_health_events();
  h->set_attempt(1);
  h->set_launch(1);
  h->set_unix_ms(kT0 + 120'000);
  h->set_kind("straggler");
  h->set_rank(5);
  h->set_node("node3");
  h->set_detail(
      "rank 5 on node3 took 2.4000 s per step, the others 1.1000 s, in 12 of the last 20 steps");
  h->set_detail_json(R"({"rank":5,"node":"node3","slow_steps":12,"window":20})");
  return run;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliRenderLaunchesTest, RelaunchedRun) {
  v1::Run run = RelaunchedRun();
  const TextOptions opt{kT0 + 1'000'000, true};
  EXPECT_EQ(RenderRestarts(run),
            "restarts   1 of 3 (1 relaunch in the allocation, 0 new attempts)\n");
  std::string text = RenderLaunches(run, opt);
  EXPECT_EQ(text,
            "\nlaunches\n"
            "ATTEMPT.LAUNCH  NODES           STARTED              DURATION  CLASS      EXIT  "
            "BLAMED  THEN\n"
            "1.1             node1,node2,+2  2023-11-14 22:13:30  3m12s     node_lost  1     "
            "node3   relaunch\n"
            "    reason    node node3 lost: worker silent for 45 s\n"
            "    evidence  lost node3; silent node3 45.2 s\n"
            "1.2             node1,node2,+2  2023-11-14 22:17:20  11m00s    succeeded  0     "
            "-       succeed\n")
      << text;
  std::string health = RenderHealthEvents(run, opt);
  EXPECT_TRUE(Has(health, "\nhealth events\nTIME  "));
  EXPECT_TRUE(Has(
      health, "2023-11-14 22:15:20  1.1             straggler  5     node3  rank 5 on node3 took"))
      << health;

  // The whole of `show`: the restarts in the header, launches after attempts.
  std::string show = RenderRun(run, opt);
  EXPECT_TRUE(Has(show, "\nrestarts   1 of 3 (1 relaunch"));
  EXPECT_LT(show.find("\nattempts\n"), show.find("\nlaunches\n"));
  EXPECT_LT(show.find("\nlaunches\n"), show.find("\nhealth events\n"));
}

TEST(CliRenderLaunchesTest, RestartsOnlyWhenTheRunMayRestart) {
  v1::Run run = RelaunchedRun();
  run.mutable_summary()->set_restarts(0);
  EXPECT_EQ(RenderRestarts(run), "restarts   0 of 3\n");
  run.set_spec_toml("");  // unreadable: no budget
  EXPECT_EQ(RenderRestarts(run), "");
  EXPECT_FALSE(Has(RenderRun(run, TextOptions{kT0, true}), "restarts"));
  run.mutable_summary()->set_restarts(2);
  run.mutable_summary()->set_relaunches(1);
  run.mutable_summary()->set_restart_attempts(1);
  EXPECT_EQ(RenderRestarts(run), "restarts   2 (1 relaunch in the allocation, 1 new attempt)\n");
}

void SetGoodput(v1::Run* run) {
  v1::RunSummary* s = run->mutable_summary();
  v1::StateSeconds* t = s->mutable_state_seconds();
  t->set_queued(1200);
  t->set_gating(60);
  t->set_running(3 * 3600 + 12 * 60);
  t->set_redone(6 * 60);
  t->set_restarting(125.4);
  s->set_goodput_ratio(11520.0 / (1200 + 60 + 11520 + 360 + 125.4));
}

TEST(CliRenderLaunchesTest, GoodputFollowsTheRestarts) {
  v1::Run run = RelaunchedRun();
  EXPECT_EQ(RenderGoodput(run), "") << "an older controller sends none";
  EXPECT_FALSE(Has(RenderRun(run, TextOptions{kT0, true}), "goodput"));
  SetGoodput(&run);
  EXPECT_EQ(RenderGoodput(run),
            "goodput    86.8% (running 3h12m, redone 6m, restarting 2m05s, gating 1m, queued 20m)\n");
  std::string show = RenderRun(run, TextOptions{kT0, true});
  EXPECT_TRUE(Has(show, "restarts   1 of 3 (1 relaunch in the allocation, 0 new attempts)\n"
                        "goodput    86.8% (running 3h12m,"))
      << show;

  // A short run: seconds; nothing yet: 0s.
  v1::StateSeconds* t = run.mutable_summary()->mutable_state_seconds();
  *t = v1::StateSeconds();
  t->set_running(14.6);
  t->set_gating(0.4);
  run.mutable_summary()->set_goodput_ratio(14.6 / 15);
  EXPECT_EQ(RenderGoodput(run),
            "goodput    97.3% (running 14s, redone 0s, restarting 0s, gating 400ms, queued 0s)\n");
  // A continuation ahead's handoffs, where there were any.
  t->set_handoff(3);
  EXPECT_EQ(RenderGoodput(run), "goodput    97.3% (running 14s, redone 0s, restarting 0s, handoff "
                                "3s, gating 400ms, queued 0s)\n");
}

// checkpoint.every_steps = "auto": the newest interval chosen, where its event is among
// the run's; none, or a malformed one, says nothing.
TEST(CliRenderLaunchesTest, TheNewestAutoCheckpointIntervalIsShown) {
  v1::Run run = RelaunchedRun();
  EXPECT_EQ(RenderCheckpointInterval(run), "");
  auto add = [&](const std::string& kind, int launch, const std::string& json) {
    v1::HealthEvent* e = run.add_health_events();
    e->set_attempt(1);
    e->set_launch(launch);
    e->set_kind(kind);
    e->set_detail_json(json);
  };
  add("checkpoint_interval", 1, R"({"step":4,"every_steps":3})");
  add("straggler", 1, R"({"rank":2})");
  add("checkpoint_interval", 2, R"({"step":20,"every_steps":1})");
  EXPECT_EQ(RenderCheckpointInterval(run),
            "checkpoint every 1 step (auto, chosen after step 20 of launch 1.2; its "
            "checkpoint_interval event says why)\n");
  EXPECT_TRUE(Has(RenderRun(run, TextOptions{kT0, true}), "\ncheckpoint every 1 step (auto"));
  add("checkpoint_interval", 2, R"({"every_steps":"many"})");
  EXPECT_EQ(RenderCheckpointInterval(run), "") << "the newest is malformed: nothing said";
}

TEST(CliRenderLaunchesTest, HangUserErrorMalformedAndRunning) {
  v1::Run run;
  auto* hang =
      AddLaunch(&run, 1, 1, {"node1", "node2"}, kT0, kT0 + 700'000, "hang", 1, "new_attempt");
  hang->set_blamed_node("node2");
  hang->set_reason("rank 3 on node2 hung: no step for 600 s after step 120");
  hang->set_evidence_json(
      R"({"step_exit_code":1,"rank":3,"node":"node2","last_step":120,"silent_s":600.5,)"
      R"("before_first_step":false,"class":"hang"})");
  auto* user = AddLaunch(&run, 2, 1, {"node1", "node4"}, kT0 + 800'000, kT0 + 810'000, "user_error",
                         79, "fail");
  user->set_reason("rank 0 on node1 exited with 79: the program asked not to be retried");
  user->set_evidence_json(
      R"({"rank":0,"node":"node1","exit_code":79,"signal":0,"after_stop":false,)"
      R"("markers":[],"evidence_line":"ValueError: bad config\nnext","failing_nodes":["node1"],)"
      R"("xid":79,"class":"user_error"})");
  auto* bad = AddLaunch(&run, 3, 1, {}, kT0 + 900'000, kT0 + 901'000, "signal", 137, "fail");
  bad->set_evidence_json("{\"rank\": 1, " + std::string(300, 'x'));
  auto* live = AddLaunch(&run, 4, 1, {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"},
                         kT0 + 950'000, 0, "", 0, "");
  live->set_evidence_json("{");  // never read while running

  std::string text = RenderLaunches(run, TextOptions{kT0 + 1'000'000, true});
  for (const std::string& part : std::vector<std::string>{
           "1.1             node1,node2  2023-11-14 22:13:20  11m40s    hang        1     node2   "
           "new attempt\n",
           "    evidence  rank 3 on node2; silent 600.5 s; last step 120\n",
           "2.1             node1,node4  2023-11-14 22:26:40  10s       user_error  79    -       "
           "fail\n",
           "    reason    rank 0 on node1 exited with 79: the program asked not to be retried\n",
           "    evidence  rank 0 on node1; exit 79; xid 79; log: ValueError: bad config next\n",
           "3.1             -            2023-11-14 22:28:20  1s        signal      137   -       "
           "fail\n",
           "    reason    -\n",
           "    evidence  {\"rank\": 1, " + std::string(185, 'x') + "...\n",
           "4.1             n1,n2,+6     2023-11-14 22:29:10  50s       running     -     -       "
           "-\n",
       }) {
    EXPECT_TRUE(Has(text, part)) << "missing: " << part << "\nin:\n" << text;
  }
  EXPECT_EQ(text.find("4.1"), text.rfind("\n4.1") + 1);  // the running launch: no detail
  EXPECT_TRUE(text.size() > 0 && text.back() == '\n');
}

TEST(CliRenderLaunchesTest, EvidenceNeverThrows) {
  EXPECT_EQ(EvidenceSummary(""), "");
  EXPECT_EQ(EvidenceSummary("[1,2]"), "[1,2]");           // not an object
  EXPECT_EQ(EvidenceSummary(R"({"class":"gate"})"), "");  // nothing past the table
  EXPECT_EQ(EvidenceSummary(R"({"rank":"x","signal":9,"markers":"nccl_error"})"),
            "signal 9 (SIGKILL); markers nccl_error");  // a rank that is not a number: left out
  EXPECT_EQ(EvidenceSummary("\xff\xfe"), "\xff\xfe");   // not UTF-8: raw
  EXPECT_EQ(EvidenceSummary(std::string(500, '{')).size(), kEvidenceWidth);
  std::string deep = R"({"k":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  EXPECT_EQ(EvidenceSummary(deep), "k ...");
}

TEST(CliRenderLaunchesTest, ShortNodeLists) {
  google::protobuf::RepeatedPtrField<std::string> nodes;
  EXPECT_EQ(ShortNodeList(nodes), "-");
  for (const char* n : {"a", "b", "c"}) *nodes.Add() = n;
  EXPECT_EQ(ShortNodeList(nodes), "a,b,c");
  *nodes.Add() = "d";
  EXPECT_EQ(ShortNodeList(nodes), "a,b,+2");
}

TEST(CliRenderLaunchesJsonTest, LaunchesHealthAndRestarts) {
  v1::Run run = RelaunchedRun();
  run.mutable_launches(1)->set_evidence_json("not json");
  Json j = RunToJson(run);
  EXPECT_EQ(j["restarts"], 1);
  EXPECT_EQ(j["relaunches"], 1);
  EXPECT_EQ(j["restart_attempts"], 0);
  EXPECT_EQ(j["max_restarts"], 3);
  EXPECT_FALSE(j.contains("goodput_ratio")) << "none sent";
  SetGoodput(&run);
  j = RunToJson(run);
  EXPECT_NEAR(j["goodput_ratio"].get<double>(), 0.868, 0.001);
  EXPECT_EQ(j["state_seconds"], (Json{{"queued", 1200.0},
                                      {"gating", 60.0},
                                      {"running", 11520.0},
                                      {"redone", 360.0},
                                      {"restarting", 125.4},
                                      {"handoff", 0.0}}));
  // Next to the restarts, at the top level.
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  auto at = std::find(keys.begin(), keys.end(), "restart_attempts");
  ASSERT_LT(at + 2, keys.end());
  EXPECT_EQ(at[1], "goodput_ratio");
  EXPECT_EQ(at[2], "state_seconds");
  ASSERT_EQ(j["launches"].size(), 2u);
  const Json& l = j["launches"][0];
  EXPECT_EQ(l["attempt"], 1);
  EXPECT_EQ(l["launch"], 1);
  EXPECT_EQ(l["failure_class"], "node_lost");
  EXPECT_EQ(l["blamed_node"], "node3");
  EXPECT_EQ(l["recovery"], "relaunch");
  EXPECT_EQ(l["exit_code"], 1);
  EXPECT_EQ(l["nodes"][2], "node3");
  EXPECT_EQ(l["ended_unix_ms"], kT0 + 202'000);
  EXPECT_EQ(Json::parse(l["evidence_json"].get<std::string>())["lost_nodes"][0], "node3");
  EXPECT_EQ(l["evidence"]["lost_nodes"][0], "node3");  // embedded too
  EXPECT_EQ(j["launches"][1]["recovery"], "succeed");
  EXPECT_EQ(j["launches"][1]["evidence"], "not json");
  EXPECT_EQ(j["launches"][1]["blamed_node"], "");
  const Json& h = j["health_events"][0];
  EXPECT_EQ(h["kind"], "straggler");
  EXPECT_EQ(h["rank"], 5);
  EXPECT_EQ(h["node"], "node3");
  EXPECT_EQ(h["launch"], 1);

  run.set_spec_toml("");
  EXPECT_TRUE(RunToJson(run)["max_restarts"].is_null());
  v1::ListRunsResponse list;
  *list.add_runs() = run.summary();
  EXPECT_EQ(RunListToJson(list)[0]["restart_attempts"], 0);
}

}  // namespace
}  // namespace trellis::cli
