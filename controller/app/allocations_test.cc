// Allocations alone: a FakeClock, and the commands it returns for a worker's
// node (answered now, or after the one ShowJob in flight for its job).
#include "controller/app/allocations.h"

#include "controller/app/part_test_util.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;

class AllocationsTest : public PartTest {
 protected:
  // The NodeChecked for `ticket` in `fx` (a test failure if there is none).
  absl::Status CheckedOf(const Effects& fx, uint64_t ticket) {
    for (const NodeChecked* c : fx.All<NodeChecked>())
      if (c->ticket == ticket) return c->status;
    ADD_FAILURE() << "no answer for ticket " << ticket;
    return absl::UnknownError("no answer");
  }
  JobShown Shown(const std::string& nodelist) {
    SlurmJob job;
    job.id = "42";
    job.nodelist = nodelist;
    return {"42", std::optional<SlurmJob>(job)};
  }
  Allocations allocations_{ctx_};
};

TEST_F(AllocationsTest, AJobWithoutAnIdIsUnavailableAtOnce) {
  Effects fx = allocations_.Check("", "node1", false, 1);
  EXPECT_EQ(CheckedOf(fx, 1).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(fx.All<ShowJob>().empty());
}

TEST_F(AllocationsTest, OneQuestionPerJobAndEveryCallerWaitingOnItIsAnswered) {
  Effects first = allocations_.Check("42", "node1", false, 1);
  EXPECT_EQ(Only<ShowJob>(first).job_id, "42");
  EXPECT_TRUE(first.All<NodeChecked>().empty()) << "waits for Slurm's answer";
  EXPECT_TRUE(allocations_.Check("42", "node9", false, 2).empty()) << "joins the question";

  Effects answered = allocations_.Answered(Shown("node[1-2]"));
  EXPECT_TRUE(CheckedOf(answered, 1).ok());
  absl::Status outside = CheckedOf(answered, 2);
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(outside.message().find("node9 is not in the allocation of Slurm job 42"),
            std::string::npos)
      << outside;
  EXPECT_TRUE(answered.All<ShowJob>().empty());
}

TEST_F(AllocationsTest, AKnownAllocationAnswersAtOnceAndAnOutsiderIsNotReaskedSoon) {
  allocations_.Check("42", "node1", false, 1);
  allocations_.Answered(Shown("node[1-2]"));
  Effects inside = allocations_.Check("42", "node2", false, 2);
  EXPECT_TRUE(CheckedOf(inside, 2).ok());
  EXPECT_TRUE(inside.All<ShowJob>().empty());
  Effects outside = allocations_.Check("42", "node9", false, 3);
  EXPECT_EQ(CheckedOf(outside, 3).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(outside.All<ShowJob>().empty()) << "a bogus node does not keep Slurm busy";

  clock_.Advance(Allocations::kReaskAfter + seconds(1));
  Effects later = allocations_.Check("42", "node9", false, 4);
  EXPECT_EQ(Only<ShowJob>(later).job_id, "42") << "asked again after kReaskAfter";
  EXPECT_TRUE(later.All<NodeChecked>().empty());
}

TEST_F(AllocationsTest, AFreshQuestionIsNotAnsweredByOneAskedBeforeIt) {
  allocations_.Check("42", "node1", false, 1);
  EXPECT_TRUE(allocations_.Check("42", "node3", /*fresh=*/true, 2).empty());
  // The answer to the first question is the old allocation: the fresh caller
  // waits for a question of its own.
  Effects old_answer = allocations_.Answered(Shown("node[1-2]"));
  EXPECT_TRUE(CheckedOf(old_answer, 1).ok());
  EXPECT_EQ(old_answer.All<NodeChecked>().size(), 1u);
  EXPECT_EQ(Only<ShowJob>(old_answer).job_id, "42");

  Effects new_answer = allocations_.Answered(Shown("node[3-4]"));
  EXPECT_TRUE(CheckedOf(new_answer, 2).ok());
  // A fresh question always asks, even with an answer known.
  EXPECT_EQ(Only<ShowJob>(allocations_.Check("42", "node3", true, 3)).job_id, "42");
}

TEST_F(AllocationsTest, SlurmNotAnsweringIsUnavailableAndTheWorkerRetries) {
  allocations_.Check("42", "node1", false, 1);
  Effects fx = allocations_.Answered({"42", absl::DeadlineExceededError("scontrol timed out")});
  absl::Status st = CheckedOf(fx, 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("scontrol timed out"), std::string::npos) << st;
  EXPECT_EQ(Only<ShowJob>(allocations_.Check("42", "node1", false, 2)).job_id, "42")
      << "nothing known: asked again";
}

TEST_F(AllocationsTest, TheReconcilersSnapshotKeepsAKnownAllocationCurrent) {
  allocations_.Check("42", "node1", false, 1);
  allocations_.Answered(Shown("node[1-2]"));
  SlurmJob job;
  job.id = "42";
  job.nodelist = "node[5-6]";  // requeued onto other nodes
  allocations_.Observe({job});
  Effects fx = allocations_.Check("42", "node5", false, 2);
  EXPECT_TRUE(CheckedOf(fx, 2).ok());
  EXPECT_TRUE(fx.All<ShowJob>().empty()) << "squeue's answer is Slurm's word";
  allocations_.Observe({});  // ended: forgotten
  EXPECT_EQ(allocations_.Known("42"), nullptr);
}

}  // namespace
}  // namespace trellis::controller
