// The spare pools alone (restart.spare_pool_nodes): a run that trains gets a
// pool job (stored, then submitted off its own and the quarantined nodes);
// squeue makes it stand; the run's end cancels it; a refused sbatch ends it
// and backs off; a drawn pool job's node is checked against that job. Its
// standby workers: their secret, their gate, held calls, leaving, silence.
#include "controller/app/spare_pools.h"

#include "common/sha256.h"
#include "common/version.h"
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

TEST_F(SparePoolsTest, AnUnansweredPoolJobOfARunThatEndedIsFoundByNameAndCancelled) {
  PoolJobRecord p;
  p.run_id = "hello-1";
  p.pool = 1;
  p.job_name = "trellis-pool-hello-1.1.abcdef01";
  store_.pools.push_back(p);
  store_.runs["hello-1"].state = RunState::kCancelled;
  Effects fx = Snapshot({});
  SubmitJob find = Only<SubmitJob>(fx);
  EXPECT_TRUE(find.only_adopt) << "never a new sbatch for a run that ended";
  EXPECT_EQ(find.job_name, p.job_name);
  EXPECT_TRUE(Snapshot({}).All<SubmitJob>().empty()) << "one lookup at a time";

  fx = pools_.OnSubmitted({"hello-1", 0, std::string("91"), "91", {}, 1});
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "91");
  EXPECT_FALSE(Only<RecordPoolJob>(fx).row.live());

  SparePools fresh{ctx_};
  fx = fresh.OnSubmitted({"hello-1", 0, absl::NotFoundError("no job named x"), "", {}, 1});
  EXPECT_TRUE(fx.All<CancelJob>().empty());
  EXPECT_EQ(Only<RecordPoolJob>(fx).row.end_reason, "the run ended (its job was never submitted)");
}

// --- standby workers ---

class StandbyTest : public SparePoolsTest {
 protected:
  void SetUp() override {
    SparePoolsTest::SetUp();
    PoolJobRecord p;
    p.run_id = "hello-1";
    p.pool = 1;
    p.job_name = "trellis-pool-hello-1.1.abcdef01";
    p.job_id = "77";
    p.nodelist = "node[9-10]";
    p.standing_since = clock_.Now();
    p.secret_sha256 = Sha256Hex("p00l");
    store_.pools.push_back(p);
  }
  // Two sockets of 119.7 GiB; the second has `free_gib` free.
  static StandbyCall Call(const std::string& node, double free_gib = 106) {
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    StandbyCall c{"hello-1", 1, node, "p00l", kVersion, "host-" + node, "77", {}};
    for (double free : {108.0, free_gib}) {
      SocketProbe s;
      s.numa_node = static_cast<int>(c.probe.sockets.size());
      s.total_bytes = static_cast<int64_t>(119.7 * kGiB);
      s.free_bytes = static_cast<int64_t>(free * kGiB);
      s.unattributed_bytes = static_cast<int64_t>(8 * kGiB);
      c.probe.sockets.push_back(s);
    }
    return c;
  }
};

TEST_F(StandbyTest, AStandbyCallIsTheirsOnlyWithTheSecretFromThePoolJob) {
  EXPECT_EQ(*pools_.StandbyJob(Call("node9")), "77");
  StandbyCall wrong = Call("node9");
  wrong.secret = "guess";
  EXPECT_EQ(pools_.StandbyJob(wrong).status().code(), absl::StatusCode::kPermissionDenied);
  StandbyCall other_job = Call("node9");
  other_job.slurm_job_id = "42";
  EXPECT_EQ(pools_.StandbyJob(other_job).status().code(), absl::StatusCode::kPermissionDenied)
      << "the run's own job is not its pool job";
  StandbyCall unknown = Call("node9");
  unknown.pool = 5;
  EXPECT_EQ(pools_.StandbyJob(unknown).status().code(), absl::StatusCode::kNotFound);
  StandbyCall old = Call("node9");
  old.version = "0.0.1";
  EXPECT_EQ(pools_.StandbyJob(old).status().code(), absl::StatusCode::kFailedPrecondition);
  store_.pools[0].job_id = "";
  EXPECT_EQ(pools_.StandbyJob(Call("node9")).status().code(), absl::StatusCode::kUnavailable)
      << "its sbatch has not answered: the worker calls again";
}

TEST_F(StandbyTest, AGatedNodeIsHeldUntilEachSnapshotAndLeavesWhenDrawn) {
  Effects fx = pools_.StandBy(Call("node9"), {11});
  EXPECT_TRUE(fx.All<SendReply>().empty()) << "held until the next snapshot";
  HealthEventRecord e = Only<RecordHealthEvent>(fx).event;
  EXPECT_EQ(e.kind, kSparePoolEvent);
  EXPECT_NE(e.detail.find("node node9 of spare pool job 1 stands by: gate passed, worst socket "
                          "106.0 GiB free"),
            std::string::npos)
      << e.detail;
  fx = Snapshot({Job("42", "RUNNING", "node[1-2]"), Job("77", "RUNNING", "node[9-10]")});
  SendReply r = Only<SendReply>(fx);
  EXPECT_EQ(r.to, 11u);
  EXPECT_FALSE(Replied<StandbyAnswer>(r).leave);
  EXPECT_NE(Replied<StandbyAnswer>(r).reason.find("gate passed"), std::string::npos);

  fx = pools_.StandBy(Call("node9"), {12});
  EXPECT_TRUE(fx.All<RecordHealthEvent>().empty()) << "gated once";
  fx = pools_.StandBy(Call("node9"), {13});
  EXPECT_EQ(Only<SendReply>(fx).to, 12u) << "a call that overtook the held one answers it";

  PoolJobRecord drawn = store_.pools[0];
  drawn.drawn_attempt = 1;
  drawn.drawn_launch = 2;
  store_.pools[0] = drawn;
  r = Only<SendReply>(pools_.PoolWritten(drawn));
  EXPECT_EQ(r.to, 13u);
  EXPECT_TRUE(Replied<StandbyAnswer>(r).leave);
  EXPECT_EQ(Replied<StandbyAnswer>(r).reason, "spare pool job 1 joins relaunch 1.2");
  r = Only<SendReply>(pools_.StandBy(Call("node10"), {14}));
  EXPECT_TRUE(Replied<StandbyAnswer>(r).leave) << "a late caller leaves at once";
}

TEST_F(StandbyTest, ANodeShortOfMemoryIsStruckAndItsPoolJobReplaced) {
  Effects fx = pools_.StandBy(Call("node10", /*free_gib=*/60), {21});
  StrikeNode strike = Only<StrikeNode>(fx);
  EXPECT_EQ(strike.node, "node10");
  EXPECT_NE(strike.reason.find("socket 1: 60.0 GiB free < 100.0 GiB required"), std::string::npos)
      << strike.reason;
  PoolJobRecord ended = Only<RecordPoolJob>(fx).row;
  EXPECT_FALSE(ended.live());
  EXPECT_EQ(ended.end_reason.rfind("node node10 failed the gate while standing by: ", 0), 0u)
      << ended.end_reason;
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "77");
  EXPECT_TRUE(Replied<StandbyAnswer>(Only<SendReply>(fx)).leave);
  Keep(fx);
  EXPECT_EQ(Only<SubmitJob>(Snapshot({Job("42", "RUNNING", "node[1-2]")})).pool, 2)
      << "the refill";
}

TEST_F(StandbyTest, APoolJobWhoseStandbyFallsSilentIsReplaced) {
  pools_.StandBy(Call("node9"), {31});
  pools_.StandBy(Call("node10"), {32});
  const std::vector<SlurmJob> jobs = {Job("42", "RUNNING", "node[1-2]"),
                                      Job("77", "RUNNING", "node[9-10]")};
  EXPECT_EQ(Snapshot(jobs).All<SendReply>().size(), 2u);
  clock_.Advance(seconds(60));
  pools_.StandBy(Call("node10"), {33});  // node9's worker no longer calls
  EXPECT_TRUE(Snapshot(jobs).All<CancelJob>().empty()) << "not yet";
  clock_.Advance(kStandbySilence);
  pools_.StandBy(Call("node10"), {34});
  Effects fx = Snapshot(jobs);
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "77");
  PoolJobRecord ended = fx.All<RecordPoolJob>().front()->row;
  EXPECT_NE(ended.end_reason.find("its standby worker on node9 has not called for 90 s"),
            std::string::npos)
      << ended.end_reason;
}

TEST_F(StandbyTest, ThePoolJobsSecretIsWrittenBeforeItsSbatchAndItsDigestStored) {
  store_.pools.clear();
  Effects fx = Snapshot({Job("42", "RUNNING", "node[1-2]")});
  PoolJobRecord row = Only<RecordPoolJob>(fx).row;
  SubmitJob call = Only<SubmitJob>(fx);
  ASSERT_EQ(call.files_first.size(), 1u);
  EXPECT_EQ(call.files_first[0].path, config_.output_root + "/hello-1/pool-1.secret");
  const std::string& content = call.files_first[0].content;
  ASSERT_EQ(content.size(), 65u) << "64 hex digits and a newline";
  EXPECT_EQ(Sha256Hex(content.substr(0, 64)), row.secret_sha256);
  const std::string wrap = call.args.back();
  EXPECT_NE(wrap.find(" standby --controller '127.0.0.1:7000' --run 'hello-1' --pool 1 "),
            std::string::npos)
      << wrap;
  EXPECT_NE(wrap.find("--secret-file '" + call.files_first[0].path + "'"), std::string::npos);
}

}  // namespace
}  // namespace trellis::controller
