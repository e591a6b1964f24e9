// The step pipeline through the agent service: batches stored once, a batch
// sent again on a new stream known, a worker's spool stored (after its final
// report, or at the controller's start), malformed batches refused whole and
// counted, a stream with a wrong secret refused.

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/run_layout.h"
#include "controller/app/controller_health_fixture.h"
#include "prometheus/text_serializer.h"

namespace trellis::controller {
namespace {

constexpr char kIngestRun[] = "ing-1";

class IngestTest : public HealthTest {
 protected:
  void SetUp() override {
    HealthTest::SetUp();
    SubmitAndRun("[job]\nname = \"ing\"\ncommand = \"train\"\n"
                 "[slurm]\nnodes = 2\nranks_per_node = 2\n",
                 kIngestRun);
  }
  double Value(const std::string& series) {
    Sync();
    std::string text =
        prometheus::TextSerializer().Serialize(controller_->metrics().registry()->Collect());
    std::string key = "\n" + series + " ";
    size_t at = text.find(key);
    if (at == std::string::npos) return std::nan("");
    return std::strtod(text.c_str() + at + key.size(), nullptr);
  }
  // A batch with an explicit seq (SendReports numbers the others).
  static v1::AgentReport Batch(uint64_t seq, std::vector<std::pair<int, int64_t>> steps) {
    v1::AgentReport r;
    r.mutable_batch()->set_seq(seq);
    for (auto [rank, step] : steps) {
      v1::RankStep* s = r.mutable_batch()->add_steps();
      s->set_rank(rank);
      s->mutable_record()->set_step(step);
      s->mutable_record()->set_loss(2.0);
      s->mutable_record()->set_tokens(100);
      s->mutable_record()->set_step_seconds(0.5);
    }
    return r;
  }
  // One stream with the batches as given (seqs untouched); the answers.
  std::vector<v1::ReportAck> Stream(const v1::WorkerIdentity& id,
                                    std::vector<v1::AgentReport> reports,
                                    grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    auto stream = agent_stub_->Report(&ctx);
    for (auto& r : reports) {
      *r.mutable_id() = id;
      stream->Write(r);
    }
    std::vector<v1::ReportAck> acks;
    v1::ReportAck ack;
    while (acks.size() < reports.size() && stream->Read(&ack)) acks.push_back(ack);
    stream->WritesDone();
    grpc::Status st = stream->Finish();
    if (status) *status = st;
    return acks;
  }
  // The spool file a worker leaves (worker/rpc/step_spool_file.cc): one
  // StepBatch as JSON per line.
  std::string WriteSpool(const std::string& node, const std::vector<v1::AgentReport>& batches,
                         std::string run_dir = "") {
    if (run_dir.empty()) run_dir = Get(kIngestRun).run_dir();
    const std::string path = StepSpoolPath(run_dir, 1, 1, node);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream out(path);
    for (const auto& r : batches) {
      std::string line;
      EXPECT_TRUE(google::protobuf::util::MessageToJsonString(r.batch(), &line).ok());
      out << line << "\n";
    }
    return path;
  }
  v1::StepSummary Step(int64_t step) {
    const v1::Run run = Get(kIngestRun);
    for (const auto& s : run.recent_steps())
      if (s.step() == step) return s;
    return {};
  }
};

TEST_F(IngestTest, ABatchSentAgainOnANewStreamIsStoredOnce) {
  v1::WorkerIdentity id = Id(kIngestRun, "node1", 1);
  auto acks = Stream(id, {Batch(1, {{0, 1}, {1, 1}}), Batch(2, {{0, 2}, {1, 2}})});
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0].seq(), 1u);
  EXPECT_EQ(acks[0].result(), v1::ReportAck::RESULT_STORED);
  EXPECT_EQ(acks[1].result(), v1::ReportAck::RESULT_STORED);
  // The worker did not hear the answers (its stream broke): it sends both
  // again, and one more.
  acks = Stream(id, {Batch(1, {{0, 1}, {1, 1}}), Batch(2, {{0, 2}, {1, 2}}),
                     Batch(3, {{0, 3}, {1, 3}})});
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[0].result(), v1::ReportAck::RESULT_DUPLICATE);
  EXPECT_EQ(acks[1].result(), v1::ReportAck::RESULT_DUPLICATE);
  EXPECT_EQ(acks[2].result(), v1::ReportAck::RESULT_STORED);
  EXPECT_EQ(Step(1).ranks(), 2);
  EXPECT_EQ(Step(3).ranks(), 2);
  EXPECT_EQ(Value("trellis_ingest_records_total{result=\"stored\"}"), 6);
  EXPECT_EQ(Value("trellis_ingest_records_total{result=\"duplicate\"}"), 4);
}

// A worker that exited with batches not stored (the controller could not
// write them) left them in its spool; its final report says how many. They
// are stored (the one stored before is a duplicate), the file is removed,
// and until then the run says its records are incomplete.
TEST_F(IngestTest, AWorkersSpoolIsStoredAndRemoved) {
  v1::WorkerIdentity id = Id(kIngestRun, "node1", 1);
  ASSERT_EQ(Stream(id, {Batch(1, {{0, 1}, {1, 1}})}).size(), 1u);
  const std::string spool = WriteSpool("node1", {Batch(1, {{0, 1}, {1, 1}}),
                                                 Batch(2, {{0, 2}, {1, 2}})});
  v1::ReportExitRequest report;
  *report.mutable_id() = id;
  report.set_unstored_step_records(4);
  grpc::ClientContext ctx;
  v1::ReportExitResponse resp;
  ASSERT_TRUE(agent_stub_->ReportExit(&ctx, report, &resp).ok());
  ASSERT_TRUE(Eventually([&] { return !std::filesystem::exists(spool); })) << spool;
  EXPECT_EQ(Step(2).ranks(), 2);
  EXPECT_EQ(Step(1).ranks(), 2) << "stored once";
  EXPECT_EQ(Get(kIngestRun).summary().unstored_step_records(), 0);
}

// A spool left while the controller was down is found when it starts again.
TEST_F(IngestTest, ASpoolLeftWhileTheControllerWasDownIsStoredAtItsStart) {
  const std::string run_dir = Get(kIngestRun).run_dir();
  StopController();
  const std::string spool = WriteSpool("node2", {Batch(1, {{2, 1}, {3, 1}})}, run_dir);
  StartController();
  ASSERT_TRUE(Eventually([&] { return !std::filesystem::exists(spool); })) << spool;
  EXPECT_EQ(Step(1).ranks(), 2);
}

TEST_F(IngestTest, MalformedBatchesAreRefusedWholeAndCounted) {
  v1::WorkerIdentity id = Id(kIngestRun, "node2", 1);
  v1::AgentReport bad_record = Batch(2, {{2, 1}, {3, 1}});
  bad_record.mutable_batch()->mutable_steps(1)->mutable_record()->set_step_seconds(-1);
  v1::AgentReport too_big = Batch(3, {});
  for (size_t i = 0; i <= kMaxBatchRecords; ++i) *too_big.mutable_batch()->add_steps() =
      Batch(0, {{2, 1}}).batch().steps(0);
  auto acks = Stream(id, {Batch(0, {{2, 1}}), bad_record, too_big, Batch(4, {{2, 1}, {-3, 1}}),
                          Batch(5, {}), Batch(6, {{2, 1}, {3, 1}})});
  ASSERT_EQ(acks.size(), 6u);
  std::map<uint64_t, v1::ReportAck> by_seq;
  for (const auto& a : acks) by_seq[a.seq()] = a;
  for (uint64_t seq : {0, 2, 3, 4, 5}) {
    EXPECT_EQ(by_seq[seq].result(), v1::ReportAck::RESULT_REFUSED) << seq;
    EXPECT_FALSE(by_seq[seq].error().empty()) << seq;
  }
  EXPECT_NE(by_seq[2].error().find("steps[1].record.step_seconds"), std::string::npos);
  EXPECT_NE(by_seq[3].error().find("at most 4096"), std::string::npos);
  EXPECT_NE(by_seq[4].error().find("steps[1].rank"), std::string::npos);
  // The stream went on: the good batch after them is stored, and only it.
  EXPECT_EQ(by_seq[6].result(), v1::ReportAck::RESULT_STORED);
  EXPECT_EQ(Step(1).ranks(), 2);
  EXPECT_EQ(Value("trellis_ingest_refused_batches_total{fault=\"bad_seq\"}"), 1);
  EXPECT_EQ(Value("trellis_ingest_refused_batches_total{fault=\"bad_record\"}"), 1);
  EXPECT_EQ(Value("trellis_ingest_refused_batches_total{fault=\"oversized\"}"), 1);
  EXPECT_EQ(Value("trellis_ingest_refused_batches_total{fault=\"bad_rank\"}"), 1);
  EXPECT_EQ(Value("trellis_ingest_refused_batches_total{fault=\"empty\"}"), 1);
  EXPECT_EQ(Value("trellis_ingest_batches_total{result=\"refused\"}"), 5);
}

TEST_F(IngestTest, AStreamWithAWrongSecretIsRefused) {
  v1::WorkerIdentity id = Id(kIngestRun, "node1", 1);
  id.set_secret("not-the-secret");
  grpc::Status st;
  auto acks = Stream(id, {Batch(1, {{0, 1}})}, &st);
  EXPECT_TRUE(acks.empty());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(Step(1).ranks(), 0);
}

}  // namespace
}  // namespace trellis::controller
