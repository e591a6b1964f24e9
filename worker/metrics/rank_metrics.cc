#include "worker/metrics/rank_metrics.h"

#include <cctype>
#include <iterator>

namespace trellis::worker {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

// Counters: each counted record adds its field's value.
constexpr StepFieldMetric kSums[] = {
    {StepFieldIndex("step_seconds"), "trellis_rank_step_seconds_total",
     "Seconds of the rank's training steps (step_seconds of its step records)", true},
    {StepFieldIndex("tokens"), "trellis_rank_tokens_total", "Tokens the rank trained on", true},
    {StepFieldIndex("fwd_seconds"), "trellis_rank_forward_seconds_total",
     "Seconds of the rank's forward passes", false},
    {StepFieldIndex("bwd_seconds"), "trellis_rank_backward_seconds_total",
     "Seconds of the rank's backward passes", false},
    {StepFieldIndex("optim_seconds"), "trellis_rank_optimizer_seconds_total",
     "Seconds of the rank's optimizer steps", false},
    {StepFieldIndex("comm_seconds"), "trellis_rank_comm_seconds_total",
     "Seconds of the rank's collective communication", false},
    {StepFieldIndex("exposed_comm_seconds"), "trellis_rank_exposed_comm_seconds_total",
     "Seconds of the rank's communication not hidden behind computation", false},
    {StepFieldIndex("checkpoint_seconds"), "trellis_rank_checkpoint_seconds_total",
     "Seconds the rank spent on checkpoints outside its steps", false},
};

// Gauges: the latest counted record's value; each appears with its first
// value.
constexpr StepFieldMetric kGauges[] = {
    {StepFieldIndex("loss"), "trellis_rank_loss", "Loss of the rank's latest step", false},
    {StepFieldIndex("step"), "trellis_rank_last_step", "Number of the rank's latest step", false},
    {StepFieldIndex("grad_norm"), "trellis_rank_grad_norm",
     "Gradient norm of the rank's latest step", false},
    {StepFieldIndex("mem_allocated_peak_bytes"), "trellis_rank_allocated_peak_bytes",
     "Peak device memory held by tensors of the rank in its latest step", false},
    {StepFieldIndex("mem_reserved_peak_bytes"), "trellis_rank_reserved_peak_bytes",
     "Peak device memory reserved by the rank's caching allocator in its latest step", false},
    {StepFieldIndex("host_arena_bytes"), "trellis_rank_host_arena_bytes",
     "Bytes of the rank's pinned host arenas (activation offload, checkpoint.async's copy)", false},
    {StepFieldIndex("nccl_max_ctas"), "trellis_rank_nccl_ctas",
     "CTAs each NCCL collective of the rank launches", false},
    {StepFieldIndex("expert_load_max_over_mean"), "trellis_rank_expert_load_max_over_mean",
     "Busiest expert's tokens over the mean expert's in the latest step (worst MoE layer)", false},
    {StepFieldIndex("ep_load_max_over_mean"), "trellis_rank_ep_load_max_over_mean",
     "Busiest EP rank's tokens over the mean EP rank's in the latest step (worst MoE layer)",
     false},
    {StepFieldIndex("checkpoint_step"), "trellis_rank_checkpoint_step",
     "Step of the rank's newest checkpoint", false},
};

std::optional<double> ValueOf(const StepFieldMetric& m, const StepRecord& r) {
  return kStepFields[m.field].Number(r);
}

constexpr size_t kMaxGpuLabel = 128;

bool DeviceListChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == ',' || c == '-' || c == '_' ||
         c == ':' || c == '.' || c == '/';
}

}  // namespace

std::vector<StepFieldMetric> StepFieldCounters() { return {std::begin(kSums), std::end(kSums)}; }
std::vector<StepFieldMetric> StepFieldGauges() { return {std::begin(kGauges), std::end(kGauges)}; }

RankInfo RankInfoFor(const RankPlan& plan) {
  RankInfo info;
  if (plan.numa_node >= 0) info.socket = std::to_string(plan.numa_node);
  auto it = plan.env.find("CUDA_VISIBLE_DEVICES");
  if (it != plan.env.end() && !it->second.empty()) {
    info.gpu = it->second.substr(0, kMaxGpuLabel);
    for (char& c : info.gpu)
      if (!DeviceListChar(c)) c = '_';
  }
  return info;
}

void AddBuildInfo(prometheus::Registry& registry, const std::string& version) {
  BuildGauge()
      .Name("trellis_build_info")
      .Help("The version of this Trellis program (value 1)")
      .Register(registry)
      .Add({{"version", version}})
      .Set(1);
}

RankMetrics::RankMetrics(prometheus::Registry& registry, std::string run, std::string node)
    : run_(std::move(run)),
      node_(std::move(node)),
      info_(BuildGauge()
                .Name("trellis_rank_info")
                .Help("A rank of this node, the socket it is bound to and the "
                      "GPU it sees "
                      "(value 1)")
                .Register(registry)),
      steps_(BuildCounter()
                 .Name("trellis_rank_steps_total")
                 .Help("Step records of the rank counted (a replayed step "
                       "counts once)")
                 .Register(registry)),
      alloc_retries_(BuildCounter()
                         .Name("trellis_rank_alloc_retries_total")
                         .Help("Device allocations of the rank retried after freeing cached "
                               "blocks")
                         .Register(registry)),
      received_(BuildGauge()
                    .Name("trellis_rank_last_step_timestamp_seconds")
                    .Help("Unix time the worker received the rank's latest step record")
                    .Register(registry)) {
  for (const StepFieldMetric& c : kSums)
    sums_.push_back(&BuildCounter().Name(c.name).Help(c.help).Register(registry));
  for (const StepFieldMetric& c : kGauges)
    gauges_.push_back(&BuildGauge().Name(c.name).Help(c.help).Register(registry));
}

RankMetrics::Series& RankMetrics::SeriesOf(int rank) {
  auto [it, inserted] = ranks_.try_emplace(rank);
  Series& s = it->second;
  if (!inserted) return s;
  s.labels = {{"run", run_}, {"node", node_}, {"rank", std::to_string(rank)}};
  s.steps = &steps_.Add(s.labels);
  s.sums.assign(std::size(kSums), nullptr);
  s.gauges.assign(std::size(kGauges), nullptr);
  for (size_t i = 0; i < std::size(kSums); ++i)
    if (kSums[i].at_start) s.sums[i] = &sums_[i]->Add(s.labels);
  return s;
}

void RankMetrics::OnStart(int rank, const RankInfo& info) {
  ended_.erase(rank);
  Series& s = SeriesOf(rank);
  if (s.info != nullptr) info_.Remove(s.info);
  prometheus::Labels labels = s.labels;
  labels["socket"] = info.socket;
  labels["gpu"] = info.gpu;
  s.info = &info_.Add(labels);
  s.info->Set(1);
}

void RankMetrics::OnStep(int rank, const StepRecord& record,
                         std::chrono::system_clock::time_point received) {
  if (ended_.count(rank) > 0) return;
  Series& s = SeriesOf(rank);
  if (s.last_step && record.step <= *s.last_step) return;
  s.last_step = record.step;
  s.steps->Increment();
  for (size_t i = 0; i < std::size(kSums); ++i) {
    std::optional<double> v = ValueOf(kSums[i], record);
    if (!v) continue;
    if (s.sums[i] == nullptr) s.sums[i] = &sums_[i]->Add(s.labels);
    s.sums[i]->Increment(*v);
  }
  for (size_t i = 0; i < std::size(kGauges); ++i) {
    std::optional<double> v = ValueOf(kGauges[i], record);
    if (!v) continue;
    if (s.gauges[i] == nullptr) s.gauges[i] = &gauges_[i]->Add(s.labels);
    s.gauges[i]->Set(*v);
  }
  if (record.alloc_retries) {
    if (s.alloc_retries == nullptr) s.alloc_retries = &alloc_retries_.Add(s.labels);
    if (*record.alloc_retries > s.alloc_retries_seen) {
      s.alloc_retries->Increment(static_cast<double>(*record.alloc_retries - s.alloc_retries_seen));
      s.alloc_retries_seen = *record.alloc_retries;
    }
  }
  if (s.received == nullptr) s.received = &received_.Add(s.labels);
  s.received->Set(std::chrono::duration<double>(received.time_since_epoch()).count());
}

void RankMetrics::OnRankEnded(int rank) {
  ended_.insert(rank);
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  RemoveSeries(it->second);
  ranks_.erase(it);
}

void RankMetrics::RemoveSeries(Series& s) {
  if (s.info != nullptr) info_.Remove(s.info);
  steps_.Remove(s.steps);
  if (s.alloc_retries != nullptr) alloc_retries_.Remove(s.alloc_retries);
  if (s.received != nullptr) received_.Remove(s.received);
  for (size_t i = 0; i < s.sums.size(); ++i)
    if (s.sums[i] != nullptr) sums_[i]->Remove(s.sums[i]);
  for (size_t i = 0; i < s.gauges.size(); ++i)
    if (s.gauges[i] != nullptr) gauges_[i]->Remove(s.gauges[i]);
}

}  // namespace trellis::worker
