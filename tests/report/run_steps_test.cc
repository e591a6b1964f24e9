// ControllerService.RunSteps over real gRPC: a run's step history folded into
// a bounded number of points, read from the store (ReadStepSeries).

#include <cmath>

#include "common/sqlite.h"
#include "controller/app/controller_fixture.h"

namespace trellis::controller {
namespace {

class RunStepsTest : public ControllerTest {
 protected:
  grpc::Status Steps(const std::string& run_id, int max_points, v1::RunStepsResponse* resp) {
    grpc::ClientContext ctx;
    v1::RunStepsRequest req;
    req.set_run_id(run_id);
    req.set_max_points(max_points);
    return user_stub_->RunSteps(&ctx, req, resp);
  }

  std::string NewRun() {
    v1::SubmitRunResponse resp;
    EXPECT_TRUE(Submit(kSpec, &resp).ok());
    return resp.run_id();
  }

  // Step rows as the step pipeline leaves them, written through a connection
  // of the test's own (the store's file is in WAL mode).
  struct Row {
    int attempt, launch;
    int64_t step;
    int ranks;
    double loss_sum;
    std::string last_json;
  };
  void PutSteps(const std::string& run_id, const std::vector<Row>& rows) {
    auto db = sqlite::Db::Open((dir_ / "t.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    sqlite::Transaction tx(db->get());
    ASSERT_TRUE(tx.status().ok());
    auto st = (*db)->Prepare(
        "INSERT INTO steps (run_id, attempt, launch, step, ranks, loss_sum, tokens, "
        "step_seconds_max, last_json, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ASSERT_TRUE(st.ok()) << st.status();
    for (const Row& r : rows) {
      ASSERT_TRUE(st->Bind(1, run_id)
                      .Bind(2, r.attempt)
                      .Bind(3, r.launch)
                      .Bind(4, r.step)
                      .Bind(5, r.ranks)
                      .Bind(6, r.loss_sum)
                      .Bind(7, int64_t{100} * r.ranks)
                      .Bind(8, 0.5)
                      .Bind(9, r.last_json)
                      .Bind(10, int64_t{1700000000000} + r.step)
                      .Run()
                      .ok());
    }
    ASSERT_TRUE(tx.Commit().ok());
  }

  static std::string Record(int64_t step, double fwd, const std::string& more = "") {
    return "{\"v\":1,\"step\":" + std::to_string(step) +
           ",\"loss\":2.0,\"tokens\":100,\"step_seconds\":0.5,\"fwd_seconds\":" +
           std::to_string(fwd) + more + "}";
  }
};

TEST_F(RunStepsTest, UnknownRunIsNotFound) {
  v1::RunStepsResponse resp;
  grpc::Status st = Steps("nope-1", 0, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("nope-1"), std::string::npos) << st.error_message();
}

TEST_F(RunStepsTest, MaxPointsOutOfRangeNamesTheFieldAndTheRange) {
  std::string id = NewRun();
  for (int bad : {-1, 100001}) {
    v1::RunStepsResponse resp;
    grpc::Status st = Steps(id, bad, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(st.error_message().rfind("max_points: ", 0), 0u) << st.error_message();
    EXPECT_NE(st.error_message().find("[0, 100000]"), std::string::npos) << st.error_message();
  }
}

TEST_F(RunStepsTest, RunWithoutStepsHasNoPoints) {
  std::string id = NewRun();
  v1::RunStepsResponse resp;
  ASSERT_TRUE(Steps(id, 0, &resp).ok());
  EXPECT_EQ(resp.run_id(), id);
  EXPECT_EQ(resp.total_steps(), 0);
  EXPECT_EQ(resp.points_size(), 0);
}

TEST_F(RunStepsTest, EveryStepIsAPointWhenTheyFit) {
  std::string id = NewRun();
  PutSteps(id, {{1, 1, 1, 4, 22.0, Record(1, 0.2)},
                {1, 1, 2, 0, 0.0, "{}"},  // no rank reported: the loss is NaN
                {1, 1, 3, 4, INFINITY, "not json"},
                {1, 2, 2, 4, 20.0,
                 Record(2, 0.3,
                        ",\"comm_seconds\":0.25,\"exposed_comm_seconds\":0.05,"
                        "\"expert_load_max_over_mean\":1.5,\"ep_load_max_over_mean\":1.25,"
                        "\"checkpoint_seconds\":3.5")}});
  v1::RunStepsResponse resp;
  ASSERT_TRUE(Steps(id, 0, &resp).ok());
  EXPECT_EQ(resp.total_steps(), 4);
  EXPECT_EQ(resp.steps_per_point(), 1);
  ASSERT_EQ(resp.points_size(), 4);
  const v1::StepPoint& first = resp.points(0);
  EXPECT_EQ(first.step(), 1);
  EXPECT_DOUBLE_EQ(first.loss(), 5.5);
  EXPECT_EQ(first.tokens(), 400);
  EXPECT_DOUBLE_EQ(first.fwd_seconds(), 0.2);
  EXPECT_FALSE(first.has_comm_seconds());
  EXPECT_FALSE(first.has_exposed_comm_seconds());
  EXPECT_DOUBLE_EQ(resp.points(3).comm_seconds(), 0.25);
  EXPECT_DOUBLE_EQ(resp.points(3).exposed_comm_seconds(), 0.05);
  EXPECT_FALSE(first.has_expert_load_max_over_mean());
  EXPECT_DOUBLE_EQ(resp.points(3).expert_load_max_over_mean(), 1.5);
  EXPECT_DOUBLE_EQ(resp.points(3).ep_load_max_over_mean(), 1.25);
  EXPECT_FALSE(first.has_checkpoint_seconds());
  EXPECT_DOUBLE_EQ(resp.points(3).checkpoint_seconds(), 3.5);
  EXPECT_TRUE(std::isnan(resp.points(1).loss()));
  EXPECT_TRUE(std::isnan(resp.points(1).loss_min()));
  EXPECT_FALSE(resp.points(1).has_fwd_seconds());
  EXPECT_TRUE(std::isinf(resp.points(2).loss()));
  EXPECT_FALSE(resp.points(2).has_fwd_seconds());
  // (attempt, launch, step) order: the relaunch's step 2 comes last.
  EXPECT_EQ(resp.points(3).launch(), 2);
  EXPECT_EQ(resp.points(3).step(), 2);
  EXPECT_EQ(resp.points(3).updated_unix_ms(), 1700000000002);
}

TEST_F(RunStepsTest, ManyStepsFoldIntoBoundedPoints) {
  std::string id = NewRun();
  std::vector<Row> rows;
  for (int64_t s = 1; s <= 3000; ++s)
    rows.push_back({1, 1, s, 2, s == 1234 ? 100.0 : 2.0, Record(s, 0.1)});
  for (int64_t s = 2501; s <= 5000; ++s) rows.push_back({1, 2, s, 2, 1.0, Record(s, 0.25)});
  PutSteps(id, rows);
  v1::RunStepsResponse resp;
  ASSERT_TRUE(Steps(id, 100, &resp).ok());
  EXPECT_EQ(resp.total_steps(), 5500);
  EXPECT_EQ(resp.steps_per_point(), 55);
  EXPECT_EQ(resp.points_size(), 100);
  int64_t tokens = 0, steps = 0;
  double highest = 0;
  for (const auto& p : resp.points()) {
    tokens += p.tokens();
    steps += p.steps();
    highest = std::max(highest, p.loss_max());
  }
  EXPECT_EQ(tokens, 5500 * 200);
  EXPECT_EQ(steps, 5500);
  EXPECT_DOUBLE_EQ(highest, 50.0);  // step 1234's spike survives in its point's max
  const v1::StepPoint& last = resp.points(99);
  EXPECT_EQ(last.launch(), 2);
  EXPECT_EQ(last.step(), 5000);
  EXPECT_DOUBLE_EQ(last.fwd_seconds(), 0.25);
  EXPECT_DOUBLE_EQ(last.step_seconds_sum(), 55 * 0.5);

  v1::RunStepsResponse one;
  ASSERT_TRUE(Steps(id, 1, &one).ok());
  ASSERT_EQ(one.points_size(), 1);
  EXPECT_EQ(one.points(0).first_step(), 1);
  EXPECT_EQ(one.points(0).steps(), 5500);
}

}  // namespace
}  // namespace trellis::controller
