#include "cli/format_nodes.h"

#include <gtest/gtest.h>

namespace trellis::cli {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

v1::GateReportResponse Report() {
  v1::GateReportResponse r;
  r.set_run_id("all-1");
  auto* g = r.add_gates();
  g->set_attempt(1);
  g->set_launch(1);
  g->set_decision("ABORT");
  g->set_reason("2 of 3 nodes passed, 3 needed");
  g->set_policy_json(
      R"({"min_free_gib_per_socket":100.0,"max_unattributed_gib_per_socket":24.0,"timeout_s":120,"touch_probe":false})");
  auto* n = g->add_nodes();
  n->set_node("node3");
  n->set_decision("fail");
  n->add_reasons("socket 0: 72.7 GiB free < 100.0 GiB required");
  auto* s = n->mutable_probe()->add_sockets();
  s->set_numa_node(0);
  s->set_total_bytes(static_cast<int64_t>(119.7 * kGiB));
  s->set_free_bytes(static_cast<int64_t>(72.7 * kGiB));
  s->set_unattributed_bytes(static_cast<int64_t>(39.9 * kGiB));
  auto* missing = g->add_nodes();
  missing->set_node("node4");
  missing->set_decision("missing");
  missing->add_reasons("no registration within 120 s");
  return r;
}

TEST(FormatNodesTest, GateReportShowsFiguresDecisionAndReasons) {
  std::string text = RenderGateReport(Report(), /*utc=*/true);
  EXPECT_NE(text.find("gate report for run all-1"), std::string::npos);
  EXPECT_NE(text.find("attempt 1 launch 1: ABORT"), std::string::npos);
  EXPECT_NE(text.find("policy: free >= 100.0 GiB and unattributed <= 24.0 GiB per socket"),
            std::string::npos);
  EXPECT_NE(text.find("node3  fail      0       119.7 GiB  72.7 GiB  39.9 GiB"), std::string::npos)
      << text;
  EXPECT_NE(text.find("socket 0: 72.7 GiB free < 100.0 GiB required"), std::string::npos);
  EXPECT_NE(text.find("no registration within 120 s"), std::string::npos);
}

TEST(FormatNodesTest, GateReportShowsTheRanksHostMemoryWhereThePolicyCountedIt) {
  v1::GateReportResponse r = Report();
  r.mutable_gates(0)->set_policy_json(
      R"({"min_free_gib_per_socket":100.0,"max_unattributed_gib_per_socket":24.0,"timeout_s":120,)"
      R"("touch_probe":false,"rank_host_gib":30.25,"ranks_per_node":4,)"
      R"("rank_host_what":"checkpoint.async's copy of the state 30.25 GiB"})");
  EXPECT_EQ(RenderGatePolicy("not json"), "");
  EXPECT_NE(RenderGateReport(r, true)
                .find("        ranks' host memory: 30.2 GiB per rank bound to a socket (4 ranks "
                      "per node; checkpoint.async's copy of the state 30.25 GiB); nodes with "
                      "less free than that on top go last\n"),
            std::string::npos)
      << RenderGateReport(r, true);
  // A record from before the policy counted it (no such keys): no such line.
  EXPECT_EQ(RenderGateReport(Report(), true).find("ranks' host memory"), std::string::npos);
}

TEST(FormatNodesTest, GateReportJsonKeepsBytesAndPolicy) {
  Json j = GateReportToJson(Report());
  EXPECT_EQ(j["gates"][0]["policy"]["min_free_gib_per_socket"], 100.0);
  EXPECT_EQ(j["gates"][0]["nodes"][0]["probe"]["sockets"][0]["free_bytes"],
            static_cast<int64_t>(72.7 * kGiB));
  EXPECT_EQ(j["gates"][0]["nodes"][1]["decision"], "missing");
}

TEST(FormatNodesTest, NodesTable) {
  v1::ListNodesResponse nodes;
  EXPECT_EQ(RenderNodes(nodes, 0, true), "no node has been quarantined\n");
  auto* n = nodes.add_nodes();
  n->set_name("node3");
  n->set_state("quarantined");
  n->set_strikes(2);
  n->set_since_unix_ms(1000);
  n->set_expiry_unix_ms(0);
  n->set_actor("user:alice");
  n->set_reason("flaky link");
  n->set_evidence_json("{\"x\":1}");
  std::string text = RenderNodes(nodes, 61000, true);
  EXPECT_NE(text.find("node3  quarantined  2"), std::string::npos) << text;
  EXPECT_NE(text.find("released by hand"), std::string::npos);
  EXPECT_EQ(NodesToJson(nodes)[0]["evidence"]["x"], 1);
  EXPECT_EQ(GiB(static_cast<int64_t>(72.7 * kGiB)), "72.7 GiB");
  EXPECT_TRUE(NodesToJson(nodes)[0]["last_check"].is_null());
}

TEST(FormatNodesTest, NodesShowTheirLastCheck) {
  v1::ListNodesResponse nodes;
  auto* n = nodes.add_nodes();
  n->set_name("node3");
  n->set_state("quarantined");
  n->set_strikes(2);
  n->set_expiry_unix_ms(500000);
  n->set_check_job_id("41");
  n->set_check_started_unix_ms(1000);
  n->set_check_ended_unix_ms(31000);
  n->set_check_summary("exit 1: certify: FAILED: numa: no NUMA nodes");
  std::string text = RenderNodes(nodes, 91000, true);
  EXPECT_NE(text.find("FAILED 1m ago (job 41): exit 1: certify: FAILED: numa"),
            std::string::npos)
      << text;
  Json j = NodesToJson(nodes)[0]["last_check"];
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["job_id"], "41");
  n->set_state("checking");
  n->set_check_ended_unix_ms(0);
  EXPECT_NE(RenderNodes(nodes, 31000, true).find("running (job 41), 30s so far"),
            std::string::npos)
      << RenderNodes(nodes, 31000, true);
  EXPECT_EQ(NodesToJson(nodes)[0]["last_check"]["state"], "running");
}

}  // namespace
}  // namespace trellis::cli
