#include "worker/metrics/rank_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <vector>

namespace trellis::worker {
namespace {

using std::chrono::system_clock;

// One line of the text exposition.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses what TextSerializer writes (label values here hold no quotes or
// commas).
std::vector<Sample> Scrape(prometheus::Registry& registry) {
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, registry.Collect());
  std::vector<Sample> samples;
  std::istringstream in(text.str());
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t open = line.find('{'), space = line.rfind(' ');
    s.name = line.substr(0, std::min(open, space));
    if (open != std::string::npos) {
      std::istringstream labels(line.substr(open + 1, line.find('}') - open - 1));
      for (std::string pair; std::getline(labels, pair, ',');) {
        size_t eq = pair.find('=');
        s.labels[pair.substr(0, eq)] = pair.substr(eq + 2, pair.size() - eq - 3);
      }
    }
    s.value = std::stod(line.substr(space + 1));
    samples.push_back(s);
  }
  return samples;
}

// The value of `name` for `rank`; NaN when there is no such series.
double Value(prometheus::Registry& registry, const std::string& name, int rank) {
  for (const Sample& s : Scrape(registry))
    if (s.name == name && s.labels.count("rank") && s.labels.at("rank") == std::to_string(rank))
      return s.value;
  return std::nan("");
}

bool Has(prometheus::Registry& registry, const std::string& name, int rank) {
  return !std::isnan(Value(registry, name, rank));
}

StepRecord Record(int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 3.0 - 0.5 * static_cast<double>(step);
  r.tokens = 1000;
  r.step_seconds = 0.5;
  return r;
}

const system_clock::time_point kReceived =
    system_clock::time_point(std::chrono::seconds(1700000000));

class RankMetricsTest : public ::testing::Test {
 protected:
  prometheus::Registry registry_;
  RankMetrics metrics_{registry_, "run-1", "node2"};
};

TEST_F(RankMetricsTest, CountersAddUpOverRecords) {
  metrics_.OnStart(2, {});
  // Counters of fields every record carries exist from the start, at 0.
  EXPECT_EQ(Value(registry_, "trellis_rank_steps_total", 2), 0);
  EXPECT_EQ(Value(registry_, "trellis_rank_step_seconds_total", 2), 0);
  EXPECT_EQ(Value(registry_, "trellis_rank_tokens_total", 2), 0);
  for (int64_t step = 1; step <= 3; ++step) {
    StepRecord r = Record(step);
    r.fwd_seconds = 0.125;
    r.bwd_seconds = 0.25;
    r.optim_seconds = 0.0625;
    r.comm_seconds = 0.5;
    r.exposed_comm_seconds = 0.25;
    r.grad_norm = 1.5;
    r.mem_allocated_peak_bytes = int64_t{40} << 30;
    r.mem_reserved_peak_bytes = int64_t{60} << 30;
    r.host_arena_bytes = int64_t{8} << 30;
    r.nccl_max_ctas = 16;
    r.checkpoint_step = 2;
    r.expert_load_max_over_mean = 1.5 + 0.25 * step;  // the latest step's, not a sum
    r.ep_load_max_over_mean = 1.125;
    if (step == 2) r.checkpoint_seconds = 2.5;  // only steps with checkpoint work carry it
    metrics_.OnStep(2, r, kReceived + std::chrono::seconds(step));
  }
  const std::map<std::string, double> want = {
      {"trellis_rank_steps_total", 3},
      {"trellis_rank_step_seconds_total", 1.5},
      {"trellis_rank_tokens_total", 3000},
      {"trellis_rank_forward_seconds_total", 0.375},
      {"trellis_rank_backward_seconds_total", 0.75},
      {"trellis_rank_optimizer_seconds_total", 0.1875},
      {"trellis_rank_comm_seconds_total", 1.5},
      {"trellis_rank_exposed_comm_seconds_total", 0.75},
      {"trellis_rank_checkpoint_seconds_total", 2.5},
      {"trellis_rank_loss", 1.5},
      {"trellis_rank_grad_norm", 1.5},
      {"trellis_rank_last_step", 3},
      {"trellis_rank_last_step_timestamp_seconds", 1700000003},
      {"trellis_rank_allocated_peak_bytes", 40.0 * (1 << 30)},
      {"trellis_rank_reserved_peak_bytes", 60.0 * (1 << 30)},
      {"trellis_rank_host_arena_bytes", 8.0 * (1 << 30)},
      {"trellis_rank_nccl_ctas", 16},
      {"trellis_rank_checkpoint_step", 2},
      {"trellis_rank_expert_load_max_over_mean", 2.25},
      {"trellis_rank_ep_load_max_over_mean", 1.125},
      {"trellis_rank_info", 1},
  };
  for (const auto& [name, value] : want) EXPECT_EQ(Value(registry_, name, 2), value) << name;
}

TEST_F(RankMetricsTest, ReplayedRecordsAreNotCountedTwice) {
  metrics_.OnStart(0, {});
  for (int64_t step : {1, 2, 2, 1, 3, 3}) metrics_.OnStep(0, Record(step), kReceived);
  EXPECT_EQ(Value(registry_, "trellis_rank_steps_total", 0), 3);
  EXPECT_EQ(Value(registry_, "trellis_rank_tokens_total", 0), 3000);
  EXPECT_EQ(Value(registry_, "trellis_rank_step_seconds_total", 0), 1.5);
  // A replay does not move the gauges back either.
  EXPECT_EQ(Value(registry_, "trellis_rank_last_step", 0), 3);
  EXPECT_EQ(Value(registry_, "trellis_rank_loss", 0), 1.5);
}

TEST_F(RankMetricsTest, AllocRetriesCountTheDifferences) {
  metrics_.OnStart(0, {});
  EXPECT_FALSE(Has(registry_, "trellis_rank_alloc_retries_total", 0));
  // The rank's cumulative count; a lower one never takes the counter down.
  const std::vector<std::pair<int64_t, double>> seen = {{0, 0}, {2, 2}, {2, 2},
                                                        {5, 5}, {4, 5}, {7, 7}};
  int64_t step = 0;
  for (const auto& [cumulative, want] : seen) {
    StepRecord r = Record(++step);
    r.alloc_retries = cumulative;
    metrics_.OnStep(0, r, kReceived);
    EXPECT_EQ(Value(registry_, "trellis_rank_alloc_retries_total", 0), want) << cumulative;
  }
  // A first record that already counts some: they all happened in this rank.
  StepRecord r = Record(1);
  r.alloc_retries = 4;
  metrics_.OnStep(1, r, kReceived);
  EXPECT_EQ(Value(registry_, "trellis_rank_alloc_retries_total", 1), 4);
}

TEST_F(RankMetricsTest, OnlyPhasesTheRecordCarries) {
  metrics_.OnStart(0, {});
  metrics_.OnStep(0, Record(1), kReceived);
  for (const char* absent :
       {"trellis_rank_forward_seconds_total", "trellis_rank_backward_seconds_total",
        "trellis_rank_optimizer_seconds_total", "trellis_rank_comm_seconds_total",
        "trellis_rank_exposed_comm_seconds_total", "trellis_rank_grad_norm",
        "trellis_rank_allocated_peak_bytes", "trellis_rank_nccl_ctas",
        "trellis_rank_checkpoint_step", "trellis_rank_checkpoint_seconds_total"})
    EXPECT_FALSE(Has(registry_, absent, 0)) << absent;
  StepRecord r = Record(2);
  r.comm_seconds = 0.25;
  metrics_.OnStep(0, r, kReceived);
  EXPECT_EQ(Value(registry_, "trellis_rank_comm_seconds_total", 0), 0.25);
  EXPECT_FALSE(Has(registry_, "trellis_rank_forward_seconds_total", 0));
}

TEST_F(RankMetricsTest, RankEndRemovesItsSeries) {
  metrics_.OnStart(2, {});
  metrics_.OnStart(3, {});
  for (int rank : {2, 3}) {
    StepRecord r = Record(1);
    r.grad_norm = 1;
    r.alloc_retries = 1;
    r.fwd_seconds = 0.1;
    metrics_.OnStep(rank, r, kReceived);
  }
  metrics_.OnRankEnded(2);
  // A record read from the socket after the rank was reaped brings nothing
  // back.
  metrics_.OnStep(2, Record(2), kReceived);
  std::set<std::string> rank3;
  for (const Sample& s : Scrape(registry_)) {
    EXPECT_NE(s.labels.at("rank"), "2") << s.name;
    rank3.insert(s.name);
  }
  EXPECT_EQ(rank3.size(), 10u);
  EXPECT_EQ(Value(registry_, "trellis_rank_steps_total", 3), 1);
}

TEST_F(RankMetricsTest, LabelsAreRunNodeRankOnly) {
  metrics_.OnStart(5, {"1", "GPU-8f2a"});
  StepRecord r = Record(1);
  r.grad_norm = 1;
  r.alloc_retries = 1;
  r.fwd_seconds = 0.1;
  r.bwd_seconds = 0.1;
  r.optim_seconds = 0.1;
  r.comm_seconds = 0.1;
  r.exposed_comm_seconds = 0.1;
  r.mem_allocated_peak_bytes = 1;
  r.mem_reserved_peak_bytes = 1;
  r.host_arena_bytes = 1;
  r.nccl_max_ctas = 1;
  r.checkpoint_step = 1;
  r.checkpoint_seconds = 0.1;
  metrics_.OnStep(5, r, kReceived);
  const std::map<std::string, std::string> rank_labels = {
      {"run", "run-1"}, {"node", "node2"}, {"rank", "5"}};
  std::vector<Sample> samples = Scrape(registry_);
  EXPECT_EQ(samples.size(), 20u);  // every family once
  for (const Sample& s : samples) {
    if (s.name == "trellis_rank_info") {
      std::map<std::string, std::string> want = rank_labels;
      want["socket"] = "1";
      want["gpu"] = "GPU-8f2a";
      EXPECT_EQ(s.labels, want);
    } else {
      EXPECT_EQ(s.labels, rank_labels) << s.name;
    }
  }
}

TEST(RankInfoTest, FromThePlan) {
  RankPlan plan;
  RankInfo none = RankInfoFor(plan);
  EXPECT_EQ(none.socket, "none");
  EXPECT_EQ(none.gpu, "none");
  plan.numa_node = 2;
  plan.env["CUDA_VISIBLE_DEVICES"] = "3";
  RankInfo bound = RankInfoFor(plan);
  EXPECT_EQ(bound.socket, "2");
  EXPECT_EQ(bound.gpu, "3");
  // Whatever the environment held, the label stays printable and short.
  plan.env["CUDA_VISIBLE_DEVICES"] = "0,1 \"x\"\n" + std::string(300, '7');
  RankInfo odd = RankInfoFor(plan);
  EXPECT_EQ(odd.gpu.size(), 128u);
  EXPECT_EQ(odd.gpu.substr(0, 10), "0,1__x__77");
}

TEST(BuildInfoTest, CarriesTheVersion) {
  prometheus::Registry registry;
  AddBuildInfo(registry, "1.2.3");
  std::vector<Sample> samples = Scrape(registry);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].name, "trellis_build_info");
  EXPECT_EQ(samples[0].labels, (std::map<std::string, std::string>{{"version", "1.2.3"}}));
  EXPECT_EQ(samples[0].value, 1);
}

}  // namespace
}  // namespace trellis::worker
