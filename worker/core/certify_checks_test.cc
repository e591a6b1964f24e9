#include "worker/core/certify_checks.h"

#include <gtest/gtest.h>

namespace trellis::worker {
namespace {

TEST(CertifyChecksTest, TouchShortOfTheAskFails) {
  EXPECT_EQ(TouchCheck(0, TouchFacts{0, 1 << 30, 1 << 30, "bound"}).verdict,
            CheckLine::Verdict::kOk);
  CheckLine short_of = TouchCheck(1, TouchFacts{1, 1 << 30, 1 << 29, "killed by signal 9"});
  EXPECT_EQ(short_of.verdict, CheckLine::Verdict::kFail);
  EXPECT_NE(short_of.detail.find("touched 0.50 GiB of 1.00 GiB"), std::string::npos);
  EXPECT_EQ(TouchCheck(1, absl::FailedPreconditionError("touch probe: NUMA node 1 ...")).verdict,
            CheckLine::Verdict::kSkip);
  EXPECT_EQ(TouchCheck(0, absl::InternalError("fork failed")).verdict, CheckLine::Verdict::kFail);
}

TEST(CertifyChecksTest, ComputeHasKnownAnswers) {
  ComputeFacts f = ComputeKnownAnswer(1000000);
  EXPECT_EQ(f.squares, 333333833333500000ull);
  EXPECT_EQ(ComputeCheck(f).verdict, CheckLine::Verdict::kOk);
  f.squares += 1;  // a flipped bit
  EXPECT_EQ(ComputeCheck(f).verdict, CheckLine::Verdict::kFail);
}

TEST(CertifyChecksTest, SummaryNamesTheFirstFailure) {
  using V = CheckLine::Verdict;
  EXPECT_EQ(CertifySummary({{"worker", V::kOk, ""}, {"gpus", V::kSkip, ""}}),
            "certify: passed (2 checks, 1 skipped)");
  EXPECT_EQ(CertifySummary({{"worker", V::kOk, ""}, {"numa", V::kFail, "cannot read x"},
                            {"touch 0", V::kFail, "y"}}),
            "certify: FAILED: numa: cannot read x");
}

}  // namespace
}  // namespace trellis::worker
