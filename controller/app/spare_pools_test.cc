// The spare pools alone (restart.spare_pool_nodes): a run that trains gets a
// pool job (stored, then submitted off its own and the quarantined nodes);
// squeue makes it stand; the run's end cancels it; a refused sbatch ends it
// and backs off; a drawn pool job's node is checked against that job.
#include "controller/app/spare_pools.h"

#include "controller/app/part_test_util.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;

class SparePoolsTest : public PartTest {
 protected:
  void SetUp() override {
    AddRun(RunState::kRunning, 1, std::string(kSpec) + "[restart]\nspare_pool_nodes = 1\n");
    store_.AddAttempt("hello-1", 1, "42").nodelist = "node[1-2]";
  }
  Effects Snapshot(std::vector<SlurmJob> listed,
                   std::map<std::string, absl::StatusOr<std::optional<SlurmJob>>> shown = {}) {
    return pools_.OnSnapshot({listed, std::move(shown), false});
  }
  // What the store keeps after the effects' pool writes.
  void Keep(const Effects& fx) {
    for (const RecordPoolJob* w : fx.All<RecordPoolJob>()) {
      auto it = std::find_if(store_.pools.begin(), store_.pools.end(), [&](const auto& p) {
        return p.run_id == w->row.run_id && p.pool == w->row.pool;
      });
      if (it == store_.pools.end())
        store_.pools.push_back(w->row);
      else
        *it = w->row;
    }
  }
  static SlurmJob Job(const char* id, const char* state, const char* nodelist) {
    SlurmJob j;
    j.id = id;
    j.state = state;
    j.nodelist = nodelist;
    return j;
  }
  SparePools pools_{ctx_};
};

TEST_F(SparePoolsTest, ARunThatTrainsGetsAPoolJobStoredBeforeItsSbatch) {
  QuarantineEntry bad;
  bad.node = "node7";
  bad.since = clock_.Now();
  bad.expiry = clock_.Now() + seconds(3600);
  bad.strikes = 1;
  store_.quarantine.push_back(bad);
  Effects fx = Snapshot({Job("42", "RUNNING", "node[1-2]")});
  PoolJobRecord row = Only<RecordPoolJob>(fx).row;
  EXPECT_EQ(row.pool, 1);
  EXPECT_EQ(row.nodes_asked, 1);
  EXPECT_TRUE(row.job_id.empty());
  SubmitJob call = Only<SubmitJob>(fx);
  EXPECT_EQ(call.pool, 1);
  EXPECT_EQ(call.job_name, row.job_name);
  EXPECT_EQ(call.script_path, "");
  EXPECT_NE(std::find(call.args.begin(), call.args.end(), "--exclude=node1,node2,node7"),
            call.args.end());
  Keep(fx);
  EXPECT_TRUE(Snapshot({}).All<SubmitJob>().empty()) << "its sbatch is in flight";

  fx = pools_.OnSubmitted({"hello-1", 0, std::string("77"), "", {}, 1});
  EXPECT_EQ(Only<RecordPoolJob>(fx).row.job_id, "77");
  EXPECT_EQ(Only<RecordHealthEvent>(fx).event.kind, kSparePoolEvent);
  Keep(fx);
  EXPECT_TRUE(Snapshot({Job("77", "PENDING", "")}).All<SubmitJob>().empty()) << "one at a time";

  fx = Snapshot({Job("77", "RUNNING", "node9")});
  PoolJobRecord stands = Only<RecordPoolJob>(fx).row;
  EXPECT_EQ(stands.nodelist, "node9");
  ASSERT_TRUE(stands.standing_since);
  Keep(fx);
  EXPECT_TRUE(StandingPoolOf(store_.pools));
  EXPECT_TRUE(Snapshot({Job("77", "RUNNING", "node9")}).empty()) << "standing, nothing new";
}

TEST_F(SparePoolsTest, ADrawnPoolIsRefilledAndItsNodeCheckedAgainstItsJob) {
  PoolJobRecord p;
  p.run_id = "hello-1";
  p.pool = 1;
  p.job_id = "77";
  p.nodelist = "node9";
  p.standing_since = clock_.Now();
  p.drawn_attempt = 1;
  p.drawn_launch = 2;
  store_.pools.push_back(p);
  EXPECT_EQ(pools_.DrawnJobOn("hello-1", 1, "node9"), "77");
  EXPECT_EQ(pools_.DrawnJobOn("hello-1", 1, "node1"), std::nullopt);
  EXPECT_EQ(pools_.DrawnJobOn("hello-1", 2, "node9"), std::nullopt) << "another attempt's";
  Effects fx = Snapshot({Job("42", "RUNNING", "node[1-2]"), Job("77", "RUNNING", "node9")});
  EXPECT_EQ(Only<SubmitJob>(fx).pool, 2) << "the refill";
  EXPECT_EQ(Only<RecordPoolJob>(fx).row.pool, 2);
}

TEST_F(SparePoolsTest, TheRunsEndAndTheDrawingAttemptsEndCancelThem) {
  PoolJobRecord standing;
  standing.run_id = "hello-1";
  standing.pool = 2;
  standing.job_id = "78";
  PoolJobRecord drawn = standing;
  drawn.pool = 1;
  drawn.job_id = "77";
  drawn.drawn_attempt = 1;
  store_.pools = {drawn, standing};
  store_.attempts["hello-1"][0].ended = clock_.Now();
  Effects fx = Snapshot({Job("77", "RUNNING", "node9"), Job("78", "RUNNING", "node10")});
  CancelJob cancel = Only<CancelJob>(fx);
  EXPECT_EQ(cancel.job_id, "77");
  Keep(fx);
  EXPECT_EQ(store_.pools[0].end_reason, "attempt 1, which drew it, ended");

  fx = pools_.RunEnded("hello-1");
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "78");
  Keep(fx);
  EXPECT_FALSE(store_.pools[1].live());
}

TEST_F(SparePoolsTest, ARefusedSbatchEndsItAndTheNextWaitsTheBackoff) {
  Effects fx = Snapshot({Job("42", "RUNNING", "node[1-2]")});
  Keep(fx);
  fx = pools_.OnSubmitted({"hello-1", 0,
                           absl::InternalError("sbatch: error: Batch job submission failed: "
                                               "Requested node configuration is not available"),
                           "", {}, 1});
  PoolJobRecord ended = Only<RecordPoolJob>(fx).row;
  EXPECT_FALSE(ended.live());
  EXPECT_EQ(ended.end_reason.rfind(kPoolRefusedPrefix, 0), 0u) << ended.end_reason;
  EXPECT_NE(ended.end_reason.find("the next in 60 s"), std::string::npos) << ended.end_reason;
  Keep(fx);
  EXPECT_TRUE(Snapshot({}).All<SubmitJob>().empty());
  clock_.Advance(seconds(60));
  EXPECT_EQ(Only<SubmitJob>(Snapshot({})).pool, 2);

  // A transient error keeps the row; the next snapshot submits it again under its name.
  SparePools fresh{ctx_};
  store_.pools.clear();
  fx = fresh.OnSnapshot({std::vector<SlurmJob>{}, {}, false});
  Keep(fx);
  const std::string name = store_.pools[0].job_name;
  EXPECT_TRUE(fresh.OnSubmitted({"hello-1", 0, absl::UnavailableError("slurmctld down"), "", {}, 1})
                  .All<RecordPoolJob>()
                  .empty());
  EXPECT_EQ(Only<SubmitJob>(fresh.OnSnapshot({std::vector<SlurmJob>{}, {}, false})).job_name, name);
}

TEST_F(SparePoolsTest, AJobSlurmEndedIsEndedWithItsStateAndReplaced) {
  PoolJobRecord p;
  p.run_id = "hello-1";
  p.pool = 1;
  p.job_id = "77";
  store_.pools.push_back(p);
  Effects fx = Snapshot({Job("42", "RUNNING", "node[1-2]")},
                        {{"77", std::optional<SlurmJob>(Job("77", "TIMEOUT", "node9"))}});
  EXPECT_EQ(Only<RecordPoolJob>(fx).row.end_reason, "Slurm ended it: TIMEOUT");
  EXPECT_TRUE(fx.All<CancelJob>().empty());
  Keep(fx);
  EXPECT_EQ(Only<SubmitJob>(Snapshot({Job("42", "RUNNING", "node[1-2]")})).pool, 2);
}

}  // namespace
}  // namespace trellis::controller
