#include "controller/core/continuation.h"

#include <gtest/gtest.h>

#include <cmath>

namespace trellis::controller {
namespace {

using std::chrono::seconds;

TEST(ContinuationLeadTest, AGivenLeadIsKeptUpToHalfTheLimit) {
  LeadChoice c = ChooseContinuationLead(300, {}, 120, seconds(3600));
  EXPECT_EQ(c.lead, seconds(300));
  EXPECT_NE(c.why.find("continuation_lead_s = 300"), std::string::npos) << c.why;
  c = ChooseContinuationLead(300, {}, 120, seconds(400));
  EXPECT_EQ(c.lead, seconds(200));
  EXPECT_NE(c.why.find("at most half the job's time limit: 200 s"), std::string::npos) << c.why;
}

TEST(ContinuationLeadTest, AutoTakesThePriorUntilEnoughWaitsAreSeen) {
  LeadChoice c = ChooseContinuationLead(0, {seconds(5), seconds(7)}, 30, seconds(86400));
  EXPECT_EQ(c.lead, kAutoLeadPrior);
  EXPECT_NE(c.why.find("2 queue wait(s)"), std::string::npos) << c.why;
  // A short limit bounds the prior too.
  EXPECT_EQ(ChooseContinuationLead(0, {}, 30, seconds(180)).lead, seconds(90));
}

// With the job's limit known: the lead that loses the least per second
// trained, (expected wait past it + a handoff) / (limit - lead), the waits
// fitted by a lognormal; checked against a fine search of the same loss.
TEST(ContinuationLeadTest, AutoWeighsTheWaitsPastTheLeadAgainstShorterAttempts) {
  const seconds limit(86400);
  // Waits of median 1 h and sigma 1 (their logs: 8.19 +- 1).
  std::vector<seconds> waits;
  for (double z : {-1.5, -1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0, 1.5})
    waits.push_back(seconds(static_cast<int64_t>(3600 * std::exp(z))));
  LeadChoice c = ChooseContinuationLead(0, waits, 120, limit);
  double mu = 0, ss = 0;
  for (seconds w : waits) mu += std::log(static_cast<double>(w.count())) / waits.size();
  for (seconds w : waits) ss += std::pow(std::log(static_cast<double>(w.count())) - mu, 2);
  const double sigma = std::sqrt(ss / (waits.size() - 1));
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  auto loss = [&](double lead) {
    double d = (mu - std::log(lead)) / sigma;
    double past = std::exp(mu + sigma * sigma / 2) * phi(d + sigma) - lead * phi(d);
    return (past + kAutoLeadHandoffCost.count()) / (limit.count() - lead);
  };
  double best = 1e9, want = 0;
  for (double lead = 210; lead <= 43200; lead += 10)
    if (loss(lead) < best) best = loss(lead), want = lead;
  EXPECT_NEAR(static_cast<double>(c.lead.count()), want, 0.08 * want) << c.why;
  EXPECT_GT(c.lead, seconds(4 * 3600)) << "past the 90th percentile: the tail is worth it";
  EXPECT_NE(c.why.find("loses the least"), std::string::npos) << c.why;
  // Short waits, all alike: just past them.
  c = ChooseContinuationLead(0, {seconds(300), seconds(300), seconds(300)}, 30, limit);
  EXPECT_GE(c.lead, seconds(300));
  EXPECT_LE(c.lead, seconds(330));
  // Waits longer than half the limit: the lead stops at half.
  c = ChooseContinuationLead(0, {seconds(5000), seconds(5000), seconds(5000)}, 30, seconds(7200));
  EXPECT_EQ(c.lead, seconds(3600));
}

TEST(ContinuationLeadTest, AutoIsTheNinetiethPercentileWithinFloorAndCeiling) {
  std::vector<seconds> waits;
  for (int i = 1; i <= 10; ++i) waits.push_back(seconds(i * 100));  // 100 .. 1000
  LeadChoice c = ChooseContinuationLead(0, waits, 30, std::nullopt);
  EXPECT_EQ(c.lead, seconds(900));  // nearest rank: the 9th of 10
  EXPECT_NE(c.why.find("90th percentile of the newest 10"), std::string::npos) << c.why;
  // Short waits: the floor, and 90 s before the wall-time warning's lead
  // (Slurm may send it a minute early).
  c = ChooseContinuationLead(0, {seconds(1), seconds(2), seconds(3)}, 10, std::nullopt);
  EXPECT_EQ(c.lead, seconds(100));
  c = ChooseContinuationLead(0, {seconds(1), seconds(2), seconds(3)}, 120, std::nullopt);
  EXPECT_EQ(c.lead, seconds(210));
  EXPECT_NE(c.why.find("raised to the floor 210 s"), std::string::npos) << c.why;
  // Long waits: the ceiling.
  c = ChooseContinuationLead(0, {seconds(90000), seconds(90000), seconds(90000)}, 30,
                             std::nullopt);
  EXPECT_EQ(c.lead, kAutoLeadCeiling);
}

TEST(ContinuationLeadTest, AutoLooksAtTheNewestTwentyWaitsOnly) {
  std::vector<seconds> waits(30, seconds(5000));         // old and long
  for (int i = 0; i < 20; ++i) waits.push_back(seconds(150));  // newest and short
  EXPECT_EQ(ChooseContinuationLead(0, waits, 30, std::nullopt).lead, seconds(150));
}

TEST(QueueWaitsTest, FromEligibilityToTheFirstGateOnThePartition) {
  WallTime t0 = FromUnixMillis(1'000'000);
  std::vector<AttemptQueueFacts> a = {
      {"gpu", t0, t0 + seconds(40)},
      {"cpu", t0, t0 + seconds(7)},
      {"gpu", t0 + seconds(10), std::nullopt},         // never started
      {"gpu", t0 + seconds(100), t0 + seconds(20)},    // started before --begin: 0
      {"gpu", t0 + seconds(5), t0 + seconds(30)},
  };
  EXPECT_EQ(QueueWaitsOn(a, "gpu"), (std::vector<seconds>{seconds(0), seconds(25), seconds(40)}));
  EXPECT_EQ(QueueWaitsOn(a, "cpu"), (std::vector<seconds>{seconds(7)}));
  EXPECT_TRUE(QueueWaitsOn(a, "").empty());
}

// A run that trains in a 3-minute job with 150 s left, a 60 s lead.
AheadFacts TrainingWithALimit() {
  AheadFacts f;
  f.ahead_mode = true;
  f.state = RunState::kRunning;
  f.time_limit = seconds(180);
  f.time_left = seconds(150);
  f.lead = seconds(60);
  return f;
}

TEST(DecideAheadTest, SubmitsOnceTheAttemptTrainsInAJobWithALimit) {
  AheadFacts f = TrainingWithALimit();
  AheadDecision d = DecideAhead(f);
  EXPECT_TRUE(d.submit);
  EXPECT_EQ(d.begin_in, seconds(90));
  EXPECT_NE(d.why.find("eligible in 90 s, 60 s before"), std::string::npos) << d.why;
  f.time_left = seconds(20);  // less left than the lead: eligible now
  EXPECT_EQ(DecideAhead(f).begin_in, seconds(0));
  // Not sooner than kSubmitAheadMargin before it would be eligible.
  f.time_limit = seconds(3600);
  f.time_left = seconds(60 + 120 + 1);
  EXPECT_FALSE(DecideAhead(f).submit);
  f.time_left = seconds(60 + 120);
  EXPECT_TRUE(DecideAhead(f).submit);
  EXPECT_EQ(DecideAhead(f).begin_in, seconds(120));
}

TEST(DecideAheadTest, NothingWithoutItsConditions) {
  AheadFacts f = TrainingWithALimit();
  auto without = [&](auto change) {
    AheadFacts g = f;
    change(g);
    return DecideAhead(g).submit;
  };
  EXPECT_FALSE(without([](AheadFacts& g) { g.ahead_mode = false; }));
  EXPECT_FALSE(without([](AheadFacts& g) { g.state = RunState::kGating; }));
  EXPECT_FALSE(without([](AheadFacts& g) { g.state = RunState::kRestarting; }));
  EXPECT_FALSE(without([](AheadFacts& g) { g.has_waiting = true; }));
  EXPECT_FALSE(without([](AheadFacts& g) { g.time_limit.reset(); }));  // unlimited
  EXPECT_FALSE(without([](AheadFacts& g) { g.time_left = seconds(0); }));
}

}  // namespace
}  // namespace trellis::controller
