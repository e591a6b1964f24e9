// NodeCertifier alone (certified return): on a fake clock and store, the
// commands it returns for a node whose quarantine expired.
#include "controller/app/node_certifier.h"

#include <gtest/gtest.h>

#include "controller/app/part_test_util.h"
#include "controller/core/certify.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;

class NodeCertifierTest : public PartTest {
 protected:
  NodeCertifierTest() {
    config_.quarantine.certify_return = true;
    config_.quarantine.base_duration = seconds(60);
    config_.quarantine.certify_timeout = seconds(120);
    store_.quarantine = {Strike(std::nullopt, "node3", "probe failed", "{}", "gate", false,
                                clock_.Now(), config_.quarantine)};
  }
  // What a store write of the check does to the fake store.
  void Store(const Effects& fx) {
    for (const RecordNodeCheck* c : fx.All<RecordNodeCheck>())
      store_.quarantine[0].last_check = c->check;
  }
  NodeCertifier certifier_{ctx_};
};

TEST_F(NodeCertifierTest, AnExpiredNodeGetsACheckPinnedToItStoredBeforeItsSbatch) {
  EXPECT_TRUE(certifier_.Tick({}).empty());  // still quarantined
  clock_.Advance(seconds(61));
  Effects fx = certifier_.Tick({});
  auto stored = Only<RecordNodeCheck>(fx);
  EXPECT_EQ(stored.check.job_id, "");
  EXPECT_EQ(stored.check.started, clock_.Now());
  auto job = Only<SubmitJob>(fx);
  EXPECT_EQ(job.certify_node, "node3");
  EXPECT_NE(std::find(job.args.begin(), job.args.end(), "--nodelist=node3"), job.args.end());
  EXPECT_NE(std::find(job.args.begin(), job.args.end(), "--time=2"), job.args.end());
  ASSERT_EQ(job.files_first.size(), 1u);
  EXPECT_NE(job.files_first[0].content.find("'/opt/trellis/bin/trellis-worker' check --certify"),
            std::string::npos);
  Store(fx);
  EXPECT_TRUE(certifier_.Tick({}).empty());  // its sbatch is unanswered: not asked twice
  JobSubmitted answer{"", 0, std::string("41"), "", {}, 0, "node3"};
  Effects recorded = certifier_.OnSubmitted(answer);
  EXPECT_EQ(Only<RecordNodeCheck>(recorded).check.job_id, "41");
}

TEST_F(NodeCertifierTest, APassEndsTheCheckAndAFailIsAStrike) {
  clock_.Advance(seconds(61));
  Store(certifier_.Tick({}));
  store_.quarantine[0].last_check->job_id = "41";
  auto files = certifier_.ResultFiles();
  ASSERT_EQ(files.count("node3"), 1u);
  EXPECT_NE(files["node3"].find("/certify/node3-"), std::string::npos);
  clock_.Advance(seconds(5));
  Effects failed = certifier_.Tick({{"node3", "1\ncertify: FAILED: numa: gone\n"}});
  auto ended = Only<RecordNodeCheck>(failed);
  EXPECT_FALSE(ended.check.passed);
  EXPECT_EQ(ended.check.summary, "exit 1: certify: FAILED: numa: gone");
  auto strike = Only<StrikeNode>(failed);
  EXPECT_EQ(strike.actor, "certify");
  EXPECT_FALSE(strike.until_released);
  EXPECT_NE(strike.evidence_json.find("\"check_job\":\"41\""), std::string::npos);
  Effects passed = certifier_.Tick({{"node3", "0\ncertify: passed (7 checks, 1 skipped)\n"}});
  EXPECT_TRUE(Only<RecordNodeCheck>(passed).check.passed);
  EXPECT_TRUE(passed.All<StrikeNode>().empty());
  EXPECT_EQ(passed.All<ScheduleNow>().size(), 1u);
}

TEST_F(NodeCertifierTest, ACheckThatNeverAnswersIsCancelledAndFails) {
  clock_.Advance(seconds(61));
  Store(certifier_.Tick({}));
  Store(certifier_.OnSubmitted({"", 0, std::string("41"), "", {}, 0, "node3"}));
  clock_.Advance(seconds(120));
  Effects fx = certifier_.Tick({});
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "41");
  EXPECT_EQ(Only<StrikeNode>(fx).node, "node3");
}

TEST_F(NodeCertifierTest, ARestartAsksForACheckWhoseSbatchWasUnansweredByItsName) {
  clock_.Advance(seconds(61));
  Effects first = certifier_.Tick({});
  Store(first);
  NodeCertifier restarted{ctx_};
  Effects again = restarted.Tick({});
  EXPECT_EQ(Only<SubmitJob>(again).job_name, Only<SubmitJob>(first).job_name);
  EXPECT_TRUE(again.All<RecordNodeCheck>().empty());
}

TEST_F(NodeCertifierTest, OffOrReleasedNoCheck) {
  clock_.Advance(seconds(61));
  store_.quarantine[0] = Release(store_.quarantine[0], clock_.Now(), config_.quarantine);
  EXPECT_TRUE(certifier_.Tick({}).empty());
  config_.quarantine.certify_return = false;
  EXPECT_TRUE(certifier_.Tick({}).empty());
}

}  // namespace
}  // namespace trellis::controller
