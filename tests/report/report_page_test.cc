// `trellis report`'s whole page from what the controller says: structure,
// escaping, no reference outside the page, and runs of 0, 1 and very many
// steps.

#include "cli/report/report_page.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cli/report/downsample.h"
#include "tests/report/report_test_util.h"

namespace trellis::cli::report {
namespace {

using test_util::Count;
using test_util::NestingProblem;
using test_util::PathData;
using test_util::PathPoints;

constexpr int64_t kT0 = 1700000000000;

constexpr const char* kEvil = "<script>alert(1)</script>";

ReportInput BaseInput() {
  ReportInput in;
  in.utc = true;
  in.generated_ms = kT0 + 3600 * 1000;
  v1::RunSummary* s = in.run.mutable_summary();
  s->set_run_id("tiny-moe-7");
  s->set_name("tiny-moe");
  s->set_user("alice");
  s->set_state(v1::RUN_STATE_SUCCEEDED);
  s->set_state_reason(std::string("all ranks finished ") + kEvil);
  s->set_nodes(2);
  s->set_ranks_per_node(2);
  s->set_attempts(1);
  s->set_created_unix_ms(kT0);
  s->set_last_step(-1);
  s->mutable_state_seconds()->set_running(90);
  s->mutable_state_seconds()->set_queued(10);
  s->set_goodput_ratio(0.9);
  in.steps.emplace();
  in.steps->set_run_id("tiny-moe-7");
  in.gate.emplace();
  return in;
}

void AddPoint(ReportInput* in, int launch, int64_t step, double loss) {
  v1::StepPoint* p = in->steps->add_points();
  p->set_attempt(1);
  p->set_launch(launch);
  p->set_step(step);
  p->set_first_step(step);
  p->set_steps(1);
  p->set_ranks(4);
  p->set_loss(loss);
  p->set_loss_min(loss);
  p->set_loss_max(loss);
  p->set_tokens(8192);
  p->set_step_seconds_sum(0.5);
  p->set_step_seconds(0.5);
  p->set_step_seconds_max(0.5);
  p->set_fwd_seconds(0.2);
  p->set_bwd_seconds(0.25);
  p->set_optim_seconds(0.05);
  p->set_updated_unix_ms(kT0 + step * 500);
  in->steps->set_total_steps(in->steps->total_steps() + 1);
  in->steps->set_steps_per_point(1);
}

// What every page must be, whatever the run.
void ExpectSound(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(NestingProblem(html), "");
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src=\""), std::string::npos);  // as an attribute: quoted
  EXPECT_EQ(html.find("href=\""), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
}

TEST(ReportPageTest, NoStepsSaysSo) {
  ReportInput in = BaseInput();
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(Count(html, "no steps recorded"), 3u);  // loss, tokens/s, phases
  EXPECT_EQ(Count(html, "<svg"), 0u);
  EXPECT_NE(html.find("no gate has decided yet"), std::string::npos);
  EXPECT_NE(html.find("no rank records"), std::string::npos);
  EXPECT_NE(html.find("90.0%"), std::string::npos);  // the goodput
  EXPECT_EQ(html.find("incomplete"), std::string::npos);
}

// Records the workers kept because the controller could not store them
// (a full disk): the page says the run's records are incomplete.
TEST(ReportPageTest, UnstoredRecordsMakeTheRecordsIncomplete) {
  ReportInput in = BaseInput();
  in.run.mutable_summary()->set_unstored_step_records(54);
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_NE(html.find("incomplete</span>: 54 step record(s) kept by the workers"),
            std::string::npos);
}

// A fork says under the title where it came from; a fresh run says nothing.
TEST(ReportPageTest, ForkNamesItsSourceUnderTheTitle) {
  ReportInput in = BaseInput();
  EXPECT_EQ(RenderReport(in).find("class=\"lineage\""), std::string::npos);
  in.run.set_spec_toml(
      "[job]\nname = \"m\"\n[model]\nlayers = 2\n[training]\nsteps = 30\n"
      "init_from = \"/out/runs/tiny-moe-3/checkpoints@10\"\ninit_state = \"weights\"\n");
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_NE(html.find("</h1>\n<p class=\"lineage\">from tiny-moe-3 at step 10 (weights)</p>"),
            std::string::npos);
}

TEST(ReportPageTest, OneStep) {
  ReportInput in = BaseInput();
  AddPoint(&in, 1, 1, 5.5);
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(Count(html, "<svg"), 3u);
  EXPECT_EQ(PathPoints(PathData(html, "loss")), 1u);
  EXPECT_EQ(PathPoints(PathData(html, "tokens")), 1u);
  EXPECT_NE(html.find("16.4k tokens/s"), std::string::npos);  // 8192 tokens in 0.5 s
  EXPECT_NE(PathData(html, "phase-fwd"), "");
  EXPECT_EQ(PathData(html, "phase-comm"), "");  // never reported: no line
  EXPECT_EQ(PathData(html, "phase-exposed"), "");
  in.steps->mutable_points(0)->set_comm_seconds(0.2);
  in.steps->mutable_points(0)->set_exposed_comm_seconds(0.01);
  html = RenderReport(in);
  EXPECT_NE(PathData(html, "phase-comm"), "");
  EXPECT_NE(PathData(html, "phase-exposed"), "");
}

// The expert-load section comes with the first point whose record has the
// routing figures; the EP line only where some point has EP's.
TEST(ReportPageTest, ExpertLoadOnlyForRecordsThatCarryIt) {
  ReportInput in = BaseInput();
  for (int64_t step = 1; step <= 3; ++step) AddPoint(&in, 1, step, 5.0 - step);
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(html.find("Expert load"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), 3u);
  for (int i = 0; i < 3; ++i)
    in.steps->mutable_points(i)->set_expert_load_max_over_mean(2.0 - 0.25 * i);
  html = RenderReport(in);
  ExpectSound(html);
  EXPECT_NE(html.find("Expert load"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), 4u);
  EXPECT_EQ(PathPoints(PathData(html, "load-experts")), 3u);
  EXPECT_EQ(PathData(html, "load-ep"), "");
  EXPECT_NE(html.find("1.75x"), std::string::npos);  // a point's tip
  in.steps->mutable_points(2)->set_ep_load_max_over_mean(1.0);
  html = RenderReport(in);
  EXPECT_EQ(PathPoints(PathData(html, "load-ep")), 1u);
}

TEST(ReportPageTest, NonFiniteLossesAreSkipped) {
  ReportInput in = BaseInput();
  for (int64_t step = 1; step <= 10; ++step)
    AddPoint(&in, 1, step,
             step == 4   ? std::numeric_limits<double>::quiet_NaN()
             : step == 7 ? std::numeric_limits<double>::infinity()
                         : 6.0 - 0.3 * step);
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(PathPoints(PathData(html, "loss")), 8u);
  EXPECT_EQ(PathPoints(PathData(html, "tokens")), 10u);
}

TEST(ReportPageTest, EveryTextFromUsersAndWorkersIsEscaped) {
  ReportInput in = BaseInput();
  in.run.mutable_summary()->set_name(kEvil);
  AddPoint(&in, 1, 1, 5.5);
  AddPoint(&in, 2, 1, 5.4);
  v1::RunEvent* e = in.run.add_events();
  e->set_unix_ms(kT0 + 2000);
  e->set_from(v1::RUN_STATE_RUNNING);
  e->set_to(v1::RUN_STATE_RESTARTING);
  e->set_reason(kEvil);
  e->set_evidence_json(std::string("{\"log_line\": \"") + "<img src=x onerror=alert(1)>" + "\"}");
  v1::Launch* l = in.run.add_launches();
  l->set_attempt(1);
  l->set_launch(1);
  l->add_nodes("node1\"><script>");
  l->set_started_unix_ms(kT0);
  l->set_ended_unix_ms(kT0 + 1000);
  l->set_failure_class("signal");
  l->set_reason(kEvil);
  l->set_evidence_json("not json <b>");
  v1::HealthEvent* h = in.run.add_health_events();
  h->set_attempt(1);
  h->set_launch(1);
  h->set_unix_ms(kT0 + 600);
  h->set_kind("straggler");
  h->set_rank(3);
  h->set_node("node2");
  h->set_detail(kEvil);
  v1::RankLatest* r = in.run.add_ranks();
  r->set_rank(0);
  r->set_node("<node>");
  in.ranks.push_back(*r);
  v1::GateRecord* g = in.gate->add_gates();
  g->set_decision("GO");
  g->set_reason(kEvil);
  g->set_policy_json("{\"min_free_gib_per_socket\": 1.0, \"max_unattributed_gib_per_socket\": 24}");
  v1::NodeGate* n = g->add_nodes();
  n->set_node("node1<x>");
  n->set_decision("go");
  n->add_reasons(kEvil);
  v1::SocketProbe* s = n->mutable_probe()->add_sockets();
  s->set_free_bytes(int64_t{100} << 30);
  s->set_unattributed_bytes(int64_t{3} << 30);
  s->set_total_bytes(int64_t{120} << 30);

  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<node>"), std::string::npos);
  EXPECT_EQ(html.find("node1<x>"), std::string::npos);
  EXPECT_EQ(html.find("\"><script>"), std::string::npos);
  EXPECT_GE(Count(html, "&lt;script&gt;alert(1)&lt;/script&gt;"), 6u);
  // The relaunch and the restart are marked on the step charts.
  EXPECT_GE(Count(html, "<line class=\"mark\""), 3u);
  EXPECT_EQ(Count(html, "<svg"), 5u);  // loss, tokens/s, phases, ranks, gate
  EXPECT_EQ(Count(html, "<line class=\"threshold\""), 2u);
  EXPECT_EQ(Count(PathData(html, "loss"), "M"), 2u);  // a line per launch
}

TEST(ReportPageTest, DownsampledRunsStayBounded) {
  ReportInput in = BaseInput();
  // What the controller sends for 100,000 steps at 2,000 points: 50 a point.
  for (int64_t i = 1; i <= 2000; ++i) {
    AddPoint(&in, 1, i * 50, 6.0 / std::sqrt(static_cast<double>(i)));
    v1::StepPoint* p = in.steps->mutable_points(static_cast<int>(i - 1));
    p->set_first_step(i * 50 - 49);
    p->set_steps(50);
    p->set_loss_min(p->loss() - 0.1);
    p->set_loss_max(p->loss() + 0.1);
  }
  in.steps->set_total_steps(100000);
  in.steps->set_steps_per_point(50);
  // 5,000 ranks fold into at most 2,000 bars.
  for (int rank = 0; rank < 5000; ++rank) {
    v1::RankLatest r;
    r.set_rank(rank);
    r.set_node("node" + std::to_string(rank / 8));
    r.mutable_record()->set_step_seconds(rank == 4321 ? 9 : 1);
    in.ranks.push_back(r);
  }
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_LE(PathPoints(PathData(html, "loss")), kMaxChartPoints);
  EXPECT_EQ(Count(html, "<path class=\"band\""), 1u);
  EXPECT_LE(Count(html, "<g class=\"bar\">"), kMaxChartPoints);
  EXPECT_NE(html.find("100,000 step summaries stored; each point folds 50 consecutive steps"),
            std::string::npos);
  EXPECT_NE(html.find("slowest of 3 ranks"), std::string::npos);
  EXPECT_LT(html.size(), 2u << 20);
}

TEST(ReportPageTest, GateTableCountsDecisionsAndNamesFailingNodes) {
  ReportInput in = BaseInput();
  v1::GateRecord* g = in.gate->add_gates();
  g->set_decision("GO");
  for (int i = 1; i <= 1536; ++i) {
    v1::NodeGate* n = g->add_nodes();
    n->set_node("node" + std::to_string(i));
    n->set_decision(i == 7 ? "fail" : i > 1534 ? "standby" : "go");
    if (i == 7) n->add_reasons("socket 1: 72.7 GiB free < 100.0 GiB required");
    for (int socket = 0; socket < 2; ++socket) {
      v1::SocketProbe* s = n->mutable_probe()->add_sockets();
      s->set_numa_node(socket);
      s->set_free_bytes((int64_t{100} + i % 10) << 30);
    }
  }
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_NE(html.find("1533 go, 1 fail, 2 standby; node7 fail (socket 1: 72.7 GiB free &lt; 100.0 "
                      "GiB required)"),
            std::string::npos);
  // 3,072 sockets: the chart keeps those with the least free memory.
  EXPECT_EQ(Count(html, "<g class=\"bar\">"), kMaxChartPoints / 2);
  EXPECT_NE(html.find("sockets with the least free memory"), std::string::npos);
}

// A [model] run's gate counts its ranks' host memory on the socket each is
// bound to: 2 ranks on a node of 4 sockets sit on sockets 0 and 2, so those
// bars carry a mark at min free + one rank's share, the others at min free.
TEST(ReportPageTest, GateChartMarksEachSocketsNeedWithItsRanks) {
  ReportInput in = BaseInput();
  v1::GateRecord* g = in.gate->add_gates();
  g->set_decision("GO");
  g->set_policy_json(
      R"({"min_free_gib_per_socket": 100, "max_unattributed_gib_per_socket": 24,)"
      R"( "rank_host_gib": 12, "rank_host_what": "a copy", "ranks_per_node": 2})");
  v1::NodeGate* n = g->add_nodes();
  n->set_node("node1");
  n->set_decision("go");
  for (int socket = 0; socket < 4; ++socket) {
    v1::SocketProbe* s = n->mutable_probe()->add_sockets();
    s->set_numa_node(socket);
    s->set_free_bytes(int64_t{110} << 30);
  }
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(Count(html, "<line class=\"need\""), 4u);
  EXPECT_EQ(Count(html, "with its 1 ranks"), 0u);
  EXPECT_EQ(Count(html, "needs 112 GiB with its 1 rank"), 2u) << html;
  EXPECT_EQ(Count(html, "needs 100 GiB with its 0 ranks"), 2u);
  EXPECT_NE(html.find("12 GiB a rank"), std::string::npos);

  // Without the ranks' share (no [model], or an older controller), or with
  // no count of ranks per node it can be spread over: no marks.
  g->set_policy_json(R"({"min_free_gib_per_socket": 100, "max_unattributed_gib_per_socket": 24})");
  EXPECT_EQ(Count(RenderReport(in), "<line class=\"need\""), 0u);
  for (const char* per_node : {"", R"(, "ranks_per_node": "two")", R"(, "ranks_per_node": 0)"}) {
    g->set_policy_json(std::string(R"({"min_free_gib_per_socket": 100, "rank_host_gib": 12)") +
                       per_node + "}");
    html = RenderReport(in);
    ExpectSound(html);
    EXPECT_EQ(Count(html, "<line class=\"need\""), 0u) << per_node;
  }
}

TEST(ReportPageTest, ControllerWithoutStepHistory) {
  ReportInput in = BaseInput();
  in.steps.reset();
  in.steps_note = "this controller does not serve the step history";
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_EQ(Count(html, "this controller does not serve the step history"), 3u);
}

TEST(ReportPageTest, GradNormAndLearningRatesOnlyForRecordsThatCarryThem) {
  ReportInput in = BaseInput();
  for (int64_t step = 1; step <= 4; ++step) AddPoint(&in, 1, step, 5.0 - step);
  std::string html = RenderReport(in);
  EXPECT_EQ(html.find("Gradient norm"), std::string::npos);
  EXPECT_EQ(html.find("Learning rate"), std::string::npos);
  for (int i = 0; i < 4; ++i) {
    in.steps->mutable_points(i)->set_grad_norm(1.5 - 0.25 * i);
    in.steps->mutable_points(i)->set_lr(0.003 * (i + 1) / 4);
    in.steps->mutable_points(i)->set_muon_lr(0.02 * (i + 1) / 4);
  }
  html = RenderReport(in);
  ExpectSound(html);
  EXPECT_NE(html.find("<h2>Gradient norm</h2>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Learning rate</h2>"), std::string::npos);
  EXPECT_EQ(PathPoints(PathData(html, "grad-norm")), 4u);
  EXPECT_EQ(PathPoints(PathData(html, "lr-adamw")), 4u);
  EXPECT_EQ(PathPoints(PathData(html, "lr-muon")), 4u);
  EXPECT_NE(html.find("grad norm 0.7500"), std::string::npos);  // step 4's tip
  EXPECT_NE(html.find("lr 0.003"), std::string::npos);
}

TEST(ReportPageTest, TheSpecAsSubmittedAndWithEveryDefault) {
  ReportInput in = BaseInput();
  in.run.set_spec_toml(std::string("[job]\nname = \"tiny\"\ncommand = \"true\"\n# ") + kEvil +
                       "\n[slurm]\nnodes = 1\n");
  std::string html = RenderReport(in);
  ExpectSound(html);
  EXPECT_NE(html.find("<h2>Spec</h2>"), std::string::npos);
  EXPECT_NE(html.find("nodes = 1"), std::string::npos);
  EXPECT_EQ(html.find(kEvil), std::string::npos);
  EXPECT_NE(html.find("<summary>with every default"), std::string::npos);
  EXPECT_NE(html.find("max_restarts = "), std::string::npos);  // a default the spec left out
  in.run.set_spec_toml("not [ toml");
  html = RenderReport(in);
  EXPECT_NE(html.find("not [ toml"), std::string::npos);  // shown as it is
  EXPECT_EQ(html.find("<summary>with every default"), std::string::npos);
}

}  // namespace
}  // namespace trellis::cli::report
