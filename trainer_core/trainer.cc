#include "trainer_core/trainer.h"

#include <chrono>

#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/compat.h"
#include "trainer_core/data/batches.h"
#include "trainer_core/error.h"
#include "trainer_core/model/model.h"
#include "trainer_core/optim/optim.h"
#include "trainer_core/optim/schedule.h"

namespace trellis::train {
namespace {

// Converts LibTorch's exceptions at the API edge.
template <typename F>
auto Guard(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw TrainError(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

torch::Device ResolveDevice(const std::string& want) {
  if (want == "cuda" && !compat::CudaAvailable())
    throw TrainError("training.device: \"cuda\" was asked for but no CUDA device is available");
  return (want == "cuda" || (want == "auto" && compat::CudaAvailable())) ? torch::kCUDA
                                                                         : torch::kCPU;
}

TokenBatch ToDevice(const HostBatch& b, torch::Device device) {
  auto make = [&](const std::vector<int64_t>& v) {
    return torch::tensor(v, torch::kLong).view({b.rows, b.seq_len}).to(device);
  };
  return {make(b.inputs), make(b.targets), make(b.doc_ids)};
}

// Laps of one step; synchronizes so device time lands in the right lap.
class Stopwatch {
 public:
  explicit Stopwatch(torch::Device d) : device_(d), start_(Clock::now()), lap_(start_) {}
  double Lap() {
    compat::Synchronize(device_);
    auto now = Clock::now();
    double s = std::chrono::duration<double>(now - lap_).count();
    lap_ = now;
    return s;
  }
  double Total() const { return std::chrono::duration<double>(lap_ - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  torch::Device device_;
  Clock::time_point start_, lap_;
};

}  // namespace

struct Trainer::State {
  spec::TrainerSpec spec;
  TrainerOptions options;
  torch::Device device = torch::kCPU;
  torch::Dtype compute_dtype = torch::kFloat;
  Corpus corpus;
  std::unique_ptr<BatchSource> data;
  std::unique_ptr<Model> model;
  std::unique_ptr<Muon> muon;
  std::unique_ptr<AdamW> adamw;
  int64_t step = 0;
  int64_t checkpoint_step = -1;

  NamedTensors AllState() {
    NamedTensors out;
    for (auto& b : model->blocks()) out.emplace_back("param." + b.layout->name, b.flat);
    for (size_t i = 0; i < model->router_bias().size(); ++i)
      out.emplace_back("router_bias.layers." + std::to_string(i), model->router_bias()[i]);
    for (auto& t : muon->State()) out.push_back(t);
    for (auto& t : adamw->State()) out.push_back(t);
    return out;
  }
};

Trainer::Trainer(const spec::TrainerSpec& spec, TrainerOptions options)
    : s_(std::make_unique<State>()) {
  Guard([&] {
    State& s = *s_;
    const auto& t = spec.training;
    s.spec = spec;
    s.options = std::move(options);
    s.device = ResolveDevice(t.device);
    s.compute_dtype = t.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat;
    if (t.data.empty()) throw TrainError("training.data: no corpus path given");
    s.corpus = ReadCorpus(t.data);
    if (static_cast<int64_t>(s.corpus.vocab) > spec.model.vocab)
      throw TrainError("corpus " + t.data + " has vocab " + std::to_string(s.corpus.vocab) +
                       ", larger than model.vocab = " + std::to_string(spec.model.vocab));
    s.data = std::make_unique<BatchSource>(&s.corpus, t.seq_len, t.global_batch, t.seed);
    torch::manual_seed(t.seed);
    s.model = std::make_unique<Model>(spec.model, t.seq_len, t.seed, s.device, torch::kFloat);

    MuonOptions mo{t.muon_momentum, t.muon_ns_steps, torch::kFloat, t.weight_decay};
    // "auto": bf16 wherever bf16 matmuls are fast (accelerators, bf16 compute).
    bool ns_bf16 =
        t.muon_ns_dtype == "bfloat16" ||
        (t.muon_ns_dtype == "auto" && (s.device.is_cuda() || s.compute_dtype == torch::kBFloat16));
    if (ns_bf16) mo.ns_dtype = torch::kBFloat16;
    s.muon = std::make_unique<Muon>(SlotsFor(s.model->blocks(), Optim::kMuon), mo);
    AdamWOptions ao{t.adam_beta1, t.adam_beta2, t.adam_eps, t.weight_decay};
    s.adamw = std::make_unique<AdamW>(SlotsFor(s.model->blocks(), Optim::kAdamW), ao);

    int64_t resume = s.options.resume_step;
    if (resume != kStartFresh && s.options.checkpoint_dir.empty())
      throw TrainError("resuming needs a checkpoint directory");
    if (resume == kResumeLatest) resume = LatestCompleteStep(s.options.checkpoint_dir);
    if (resume >= 0) {
      CheckpointMeta meta = LoadCheckpoint(s.options.checkpoint_dir, resume, spec, s.AllState());
      if (meta.corpus_checksum != s.corpus.checksum)
        throw TrainError("training.data: corpus " + t.data +
                         " is not the one the checkpoint was trained on (checksum differs)");
      if (meta.rows_consumed != s.data->RowsBefore(meta.step))
        throw TrainError("checkpoint step " + std::to_string(meta.step) +
                         ": data position does not match training.global_batch");
      s.step = s.checkpoint_step = meta.step;
    }
  });
}

Trainer::~Trainer() = default;

int64_t Trainer::step() const { return s_->step; }
int64_t Trainer::last_checkpoint_step() const { return s_->checkpoint_step; }

std::string Trainer::Describe() const {
  const auto& m = s_->spec.model;
  return std::to_string(s_->model->NumParams()) + " params (" +
         std::to_string(ActiveParamsPerToken(m)) + " active per token), " +
         std::to_string(m.layers) + " layers, " + std::to_string(m.experts) + " experts top-" +
         std::to_string(m.experts_per_token) + ", device " + s_->device.str() + ", " +
         s_->spec.training.dtype + ", torch " + TORCH_VERSION;
}

void Trainer::Run(int64_t last_step) {
  Guard([&] {
    last_step = std::min(last_step, s_->spec.training.steps);
    while (s_->step < last_step) Step();
    if (!s_->options.checkpoint_dir.empty() && s_->checkpoint_step != s_->step) SaveCheckpoint();
  });
}

// One step, top to bottom: batch, forward, backward, clip, optimizers, record.
void Trainer::Step() {
  State& s = *s_;
  const auto& t = s.spec.training;
  Stopwatch watch(s.device);
  TokenBatch batch = ToDevice(s.data->ForStep(s.step), s.device);
  s.model->ZeroGrad();
  ForwardResult out = s.model->Forward(batch, s.compute_dtype, t.aux_loss_coef);
  const double fwd = watch.Lap();
  out.loss.backward();
  const double bwd = watch.Lap();
  const double grad_norm = ClipGradNorm(s.model->blocks(), t.grad_clip);
  const double lr_scale = LrScale(s.step, t.warmup_steps, t.steps, t.min_lr_ratio);
  s.muon->Step(t.muon_lr * lr_scale);
  s.adamw->Step(t.lr * lr_scale);
  if (t.router_bias_rate > 0) s.model->UpdateRouterBias(out.expert_counts, t.router_bias_rate);
  const double optim = watch.Lap();
  ++s.step;

  StepRecord r;
  r.step = s.step;
  r.loss = out.ce.item<double>();
  r.tokens = int64_t{t.global_batch} * t.seq_len;
  r.step_seconds = watch.Total();
  r.grad_norm = grad_norm;
  r.fwd_seconds = fwd;
  r.bwd_seconds = bwd;
  r.optim_seconds = optim;
  const int64_t every = s.spec.checkpoint.every_steps;
  if (!s.options.checkpoint_dir.empty() && every > 0 && s.step % every == 0) SaveCheckpoint();
  if (s.checkpoint_step >= 0) r.checkpoint_step = s.checkpoint_step;
  if (s.options.on_step) s.options.on_step(r);
}

void Trainer::SaveCheckpoint() {
  Guard([&] {
    State& s = *s_;
    if (s.options.checkpoint_dir.empty()) throw TrainError("no checkpoint directory set");
    CheckpointMeta meta{s.step, s.data->RowsBefore(s.step), s.corpus.checksum};
    train::SaveCheckpoint(s.options.checkpoint_dir, s.spec, meta, s.AllState(),
                          s.spec.checkpoint.keep);
    s.checkpoint_step = s.step;
  });
}

}  // namespace trellis::train
