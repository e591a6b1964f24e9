#include "trainer_core/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>

#include "common/spec/model_fit.h"
#include "trainer_core/checkpoint/async_save.h"
#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/checkpoint/state_ranges.h"
#include "trainer_core/compat.h"
#include "trainer_core/compat_device_time.h"
#include "trainer_core/data/batches.h"
#include "trainer_core/determinism.h"
#include "trainer_core/error.h"
#include "trainer_core/memory/phase_peaks.h"
#include "trainer_core/memory/shared_bounds.h"
#include "trainer_core/model/compute_dtype.h"
#include "trainer_core/model/expert_load.h"
#include "trainer_core/model/fusions.h"
#include "trainer_core/optim/optim.h"
#include "trainer_core/optim/schedule.h"
#include "trainer_core/parallel/fsdp.h"
#include "trainer_core/parallel/nccl_log_file.h"
#include "trainer_core/parallel/shard_optim.h"
#include "trainer_core/trainer_init.h"
#include "trainer_core/trainer_state.h"

namespace trellis::train {
namespace {

// ATen's choice of kernels is process-wide: set both ways, so that a trainer
// after another in one process (tests, the worker's host) gets its own.
// Before the model exists, so cuBLAS starts with the workspace set here
// (LibTorch sizes it once per process: one trainer per rank process).
void ApplyDeterminism(bool deterministic, bool cuda) {
  if (deterministic && cuda) {
    CublasWorkspaceChoice c = ChooseCublasWorkspace(std::getenv("CUBLAS_WORKSPACE_CONFIG"));
    if (!c.problem.empty()) throw TrainError(c.problem);
    if (!c.set_to.empty()) setenv("CUBLAS_WORKSPACE_CONFIG", c.set_to.c_str(), 1);
  }
  compat::SetDeterministicAlgorithms(deterministic);
}

torch::Device ResolveDevice(const std::string& want) {
  if (want == "cuda" && !compat::CudaAvailable())
    throw TrainError("training.device: \"cuda\" was asked for but no CUDA device is available");
  return (want == "cuda" || (want == "auto" && compat::CudaAvailable())) ? torch::kCUDA
                                                                         : torch::kCPU;
}

}  // namespace

bool TrainsOnCuda(const spec::TrainingSpec& training) {
  return ResolveDevice(training.device).is_cuda();
}

void ChooseRankDevice(const spec::TrainingSpec& training, CommOptions* comm) {
  Guard([&] {
    comm->cuda = TrainsOnCuda(training);
    if (!comm->cuda) return;
    const int visible = static_cast<int>(torch::cuda::device_count());
    const char* local = std::getenv("LOCAL_RANK");
    const int local_rank = local ? std::atoi(local) : 0;
    if (visible > 1) compat::SetCudaDevice(local_rank % visible);
  });
}

namespace {

// True when each of rows [first, first + count) holds one document.
bool SingleDocumentRows(const HostBatch& b, int64_t first, int64_t count) {
  for (int64_t r = first; r < first + count; ++r) {
    const int64_t* ids = b.doc_ids.data() + r * b.seq_len;
    if (!std::all_of(ids, ids + b.seq_len, [&](int64_t d) { return d == ids[0]; })) return false;
  }
  return true;
}

// Rows [first, first + count) of the global batch, on the device. Rows of
// one document each carry no doc_ids: their attention is plainly causal.
TokenBatch RowsToDevice(const HostBatch& b, int64_t first, int64_t count, torch::Device device) {
  auto make = [&](const std::vector<int64_t>& v) {
    // Only these rows are copied (a micro-batch is a small part of the batch).
    auto rows = torch::from_blob(const_cast<int64_t*>(v.data()) + first * b.seq_len,
                                 {count, b.seq_len}, torch::kLong);
    if (!device.is_cuda()) return rows.clone();
    // From pinned memory the copy is queued, not waited for.
    return rows.pin_memory().to(device, /*non_blocking=*/true);
  };
  TokenBatch out{make(b.inputs), make(b.targets), {}};
  if (!SingleDocumentRows(b, first, count)) out.doc_ids = make(b.doc_ids);
  return out;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Whether a checkpoint whose corpus checksum is not `corpus`'s was made on the
// same tokens in format version 1, before `trellis-corpus upgrade` rewrote the
// file under a new checksum: version 1's checksum is computed to tell (one
// pass over the file, on this resume only: the next checkpoint records the
// new one), and said in the rank's log. Not where the checkpoint says its
// corpus was already version 2 (then it is another corpus, and the pass
// would only delay the error).
bool MadeBeforeTheUpgrade(const CheckpointMeta& meta, const Corpus& corpus, const std::string& path,
                          const std::function<void(const std::string&)>& note) {
  if (corpus.version < 2 || meta.corpus_version >= 2) return false;
  const auto start = std::chrono::steady_clock::now();
  const std::optional<uint64_t> v1 = VersionOneChecksum(corpus);
  if (!v1 || *v1 != meta.corpus_checksum) return false;
  if (note) {
    char took[32];
    std::snprintf(took, sizeof took, "%.1f s", std::chrono::duration<double>(
                                                   std::chrono::steady_clock::now() - start)
                                                   .count());
    note("checkpoint step " + std::to_string(meta.step) + " was made on corpus " + path +
         " before its upgrade to format version 2: its version-1 checksum " +
         Hex(meta.corpus_checksum) + " matches (checked in " + took +
         "); checkpoints from here on record its checksum " + Hex(corpus.checksum));
  }
  return true;
}

// A checkpoint a run continues exactly (a resume, or init_state "all") was
// trained on this corpus, and its data position is this spec's.
void CheckContinuable(const CheckpointMeta& meta, const TrainerOptions& o,
                      const spec::TrainerSpec& spec, const Corpus& corpus,
                      const BatchSource& data) {
  if (meta.corpus_checksum != corpus.checksum &&
      !MadeBeforeTheUpgrade(meta, corpus, spec.training.data, o.on_note))
    throw TrainError("training.data: corpus " + spec.training.data +
                     " is not the one the checkpoint was trained on (checksum " +
                     Hex(corpus.checksum) + ", the checkpoint's " + Hex(meta.corpus_checksum) +
                     (meta.corpus_version > 0
                          ? " of a version-" + std::to_string(meta.corpus_version) + " file"
                          : std::string()) +
                     ")");
  if (meta.rows_consumed != data.RowsBefore(meta.step))
    throw TrainError("checkpoint step " + std::to_string(meta.step) +
                     ": data position does not match training.global_batch");
}

// The step to resume from (kStartFresh: none; "latest" with no complete
// checkpoint is none too), its manifest checked against the spec, the corpus
// and the data position: all a rank can tell alone.
int64_t CheckedResumeStep(const TrainerOptions& o, const spec::TrainerSpec& spec,
                          const Corpus& corpus, const BatchSource& data) {
  int64_t resume = o.resume_step;
  if (resume != kStartFresh && o.checkpoint_dir.empty())
    throw TrainError("resuming needs a checkpoint directory");
  if (resume == kResumeLatest) resume = LatestCompleteStep(o.checkpoint_dir);
  if (resume < 0) return kStartFresh;
  CheckContinuable(CheckCheckpoint(o.checkpoint_dir, resume, spec), o, spec, corpus, data);
  return resume;
}

int64_t Targets(const HostBatch& b) {
  int64_t n = 0;
  for (int64_t t : b.targets) n += t != -1;
  return n;
}

}  // namespace

Trainer::Trainer(const spec::TrainerSpec& spec, TrainerOptions options)
    : s_(std::make_unique<State>()) {
  Guard([&] {
    ActiveFusions();  // a bad TRELLIS_FUSIONS_OFF stops the rank here, named
    State& s = *s_;
    const auto& t = spec.training;
    s.spec = spec;
    s.options = std::move(options);
    s.device = ResolveDevice(t.device);
    ApplyDeterminism(t.deterministic, s.device.is_cuda());
    s.compute_dtype =
        ChooseComputeDtype(t.dtype, s.device.is_cuda()).bf16() ? torch::kBFloat16 : torch::kFloat;
    if (t.data.empty()) throw TrainError("training.data: no corpus path given");
    s.corpus = ReadCorpus(t.data, s.options.data_roots);
    if (static_cast<int64_t>(s.corpus.vocab) > spec.model.vocab)
      throw RefusedInput("corpus " + t.data + " has vocab " + std::to_string(s.corpus.vocab) +
                         ", larger than model.vocab = " + std::to_string(spec.model.vocab));
    s.data = std::make_unique<BatchSource>(&s.corpus, t.seq_len, t.global_batch, t.seed,
                                           ParseRowOrder(t.row_order));
    if (!s.options.nccl_log.empty())
      s.nccl_log = std::make_unique<NcclLogFollower>(s.options.nccl_log);
    torch::manual_seed(t.seed);
    // Before the rank meets its peers (TrainerOptions::connect says why): the
    // resume, and the spec against the world it will meet.
    const int64_t resume = CheckedResumeStep(s.options, spec, s.corpus, *s.data);
    // A run with no checkpoint of its own may start from another's.
    std::optional<InitSource> init;
    if (resume < 0 && !t.init_from.empty()) {
      init = CheckedInitSource(spec);
      if (init->state == "all") {
        try {
          CheckContinuable(init->meta, s.options, spec, s.corpus, *s.data);
        } catch (const TrainError& e) {
          throw TrainError("training.init_from (init_state = \"all\"): " + std::string(e.what()));
        }
      }
    }
    const int world = s.options.comm ? s.options.comm->size() : s.options.connect.world;
    const int rank = s.options.comm ? s.options.comm->rank() : s.options.connect.rank;
    CheckRankInWorld(rank, world);
    if (t.global_batch % world != 0)
      throw TrainError("training.global_batch = " + std::to_string(t.global_batch) +
                       " is not a multiple of the world size " + std::to_string(world));
    if (auto why = spec::MicroBatchMismatch(t, world, "world " + std::to_string(world));
        !why.empty())
      throw TrainError("training.micro_batch: " + why);
    s.mesh = PlanExpertMesh(world, rank, spec.parallel.node_size, spec.parallel.ep,
                            spec.model.experts,
                            s.options.local_world_size > 0 ? s.options.local_world_size : world);
    if (auto why = spec::ExpertGroupsMismatch(spec.model, s.mesh.ep); !why.empty())
      throw TrainError("model.expert_groups: " + why);
    if (!s.options.comm) s.own_comm = ConnectComm(s.options.connect);
    s.comm = s.options.comm ? s.options.comm : s.own_comm.get();
    const Wire wire = spec.parallel.grad_reduce_dtype == "float32" ? Wire::kFp32 : Wire::kBf16;
    s.model = std::make_unique<ShardedModel>(spec.model, t.seq_len, t.seed, s.comm, s.mesh,
                                             s.device, wire,
                                             spec.parallel.activation_checkpointing,
                                             spec.parallel.expert_gather_dtype,
                                             spec.parallel.prefetch_layers);

    // The ranks that share a socket or a host, counted once (a collective:
    // decided from the spec alone) for the host memory they will all take.
    const int offload_layers = OffloadedLayers(spec.parallel.offload_fraction, spec.model.layers);
    if (offload_layers > 0 || spec.checkpoint.SavesBehindTheSteps())
      s.shared_bounds = BoundsSharedByTheRanks(*s.comm, s.device);
    s.model->SetOffloadLayers(offload_layers, s.shared_bounds);

    MuonOptions mo{t.muon_momentum, t.muon_ns_steps, torch::kFloat, t.weight_decay};
    // "auto": bf16 wherever bf16 matmuls are fast (accelerators, bf16 compute).
    bool ns_bf16 =
        t.muon_ns_dtype == "bfloat16" ||
        (t.muon_ns_dtype == "auto" && (s.device.is_cuda() || s.compute_dtype == torch::kBFloat16));
    if (ns_bf16) mo.ns_dtype = torch::kBFloat16;
    AdamWOptions ao{t.adam_beta1, t.adam_beta2, t.adam_eps, t.weight_decay};
    s.optim = std::make_unique<ShardedOptimizer>(s.model.get(), mo, ao);

    if (resume >= 0) {
      const auto load_start = std::chrono::steady_clock::now();
      CheckpointMeta meta = LoadCheckpoint(s.options.checkpoint_dir, resume, spec, s.AllState(),
                                           s.CheckpointSharding());
      // How long a resume spends reading is part of what a restart costs.
      if (s.options.on_note)
        s.options.on_note(DescribeLoad(
            meta, std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start)
                      .count()));
      s.step = s.checkpoint_step = meta.step;
    } else if (init) {
      const auto load_start = std::chrono::steady_clock::now();
      CheckpointMeta meta =
          LoadCheckpoint(init->dir, init->step, spec, InitStateOf(s.AllState(), init->state),
                         s.CheckpointSharding(), init->match());
      if (s.options.on_note)
        s.options.on_note(
            "training.init_from: " + init->state + " of " + StepDir(init->dir, init->step) +
            "; " +
            DescribeLoad(meta, std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                             load_start)
                                   .count()));
      // An exact continuation goes on from its step; otherwise step 0.
      if (init->state == "all") s.step = meta.step;
    }
    SetUpSaveBehind();
  });
}

Trainer::~Trainer() = default;

int64_t Trainer::step() const { return s_->step; }
int64_t Trainer::last_checkpoint_step() const { return s_->checkpoint_step; }

std::string Trainer::Describe() const {
  const auto& m = s_->spec.model;
  return "rank " + std::to_string(s_->comm->rank()) + " of " + std::to_string(s_->comm->size()) +
         " (node_size " + std::to_string(s_->mesh.node_size) + ", ep " +
         std::to_string(s_->mesh.ep) + "), " + std::to_string(s_->model->NumParams()) +
         " params (" + std::to_string(ActiveParamsPerToken(m)) + " active per token), " +
         std::to_string(m.layers) + " layers, " + std::to_string(m.experts) + " experts top-" +
         std::to_string(m.experts_per_token) +
         (m.expert_groups > 1 ? " in " + std::to_string(m.expert_groups) + " groups" : "") +
         ", device " + s_->device.str() + ", " +
         DescribeComputeDtype(ChooseComputeDtype(s_->spec.training.dtype, s_->device.is_cuda())) +
         (s_->spec.training.deterministic ? ", deterministic" : "") + ", torch " +
         TORCH_VERSION +
         (DescribeFusionsOff(ActiveFusions()).empty()
              ? ""
              : ", fusions off: " + DescribeFusionsOff(ActiveFusions()));
}

std::string Trainer::DescribeDevice() const {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(name) + (v ? "=" + std::string(v) : " unset");
  };
  const std::string who =
      "rank " + std::to_string(s_->comm->rank()) + " of " + std::to_string(s_->comm->size());
  if (!s_->device.is_cuda())
    return who + " on the CPU (training.device \"" + s_->spec.training.device + "\"" +
           (s_->spec.training.device == "auto" ? ": no CUDA device" : "") + ")";
  return Guard([&] {
    return who + " on GPU " + compat::DescribeCurrentCudaDevice() + " (" +
           std::to_string(torch::cuda::device_count()) + " visible; " +
           env("CUDA_VISIBLE_DEVICES") + ", " + env("LOCAL_RANK") + ")";
  });
}

bool Trainer::Run(int64_t last_step) {
  bool stopped = false;
  Guard([&] {
    last_step = std::min(last_step, s_->spec.training.steps);
    s_->run_last_step = last_step;
    while (s_->step < last_step && !stopped) {
      Step();
      stopped = s_->step < last_step && StopAgreed();
    }
    CheckpointAtTheEnd(stopped);
  });
  return stopped;
}

// Every rank must leave at the same step boundary (the next step's
// collectives would wait for the missing ones), so each rank's wish is summed
// over the world.
bool Trainer::StopAgreed() {
  State& s = *s_;
  if (!s.options.stop_requested) return false;
  return s.RanksSaying(s.options.stop_requested()) > 0;
}

// One step, top to bottom: batch, forward and backward per micro-batch, clip,
// optimizers, record. On a GPU the host queues the whole step and waits once,
// at the end, for what the record needs (loss, gradient norm, the laps' events).
void Trainer::Step() {
  State& s = *s_;
  const auto& t = s.spec.training;
  compat::ResetMemoryPeaks(s.device);
  s.comm->ResetTimes();
  compat::StepLaps laps(s.device);
  const HostBatch batch = s.data->ForStep(s.step);
  const int world = s.comm->size();
  const int64_t rows = t.global_batch / world;
  const int64_t micro = t.micro_batch > 0 ? t.micro_batch : rows, parts = rows / micro;
  const int64_t targets = Targets(batch);
  s.model->ZeroGrad();
  ShardedForward out;
  std::vector<std::vector<torch::Tensor>> forward_counts;  // each forward's, for the expert load
  for (int64_t i = 0; i < parts; ++i) {
    TokenBatch mine = RowsToDevice(batch, s.comm->rank() * rows + i * micro, micro, s.device);
    // Cross entropy over the whole batch's targets, so the micro-batches'
    // losses and gradients (accumulated in the shards) add up to the unsplit
    // batch's. The balance loss is not linear in the batch: each
    // micro-batch's own (its tokens over all ranks), weighted by its share of
    // the rows, as Megatron does.
    ShardedForward f =
        s.model->ForwardBackward(mine, targets, micro * world * t.seq_len, s.compute_dtype,
                                 t.aux_loss_coef / static_cast<double>(parts), &laps);
    laps.Mark();
    forward_counts.push_back(f.expert_counts);
    if (i == 0) {
      out = std::move(f);
      continue;
    }
    out.ce = out.ce + f.ce;
    out.routing_changed = out.routing_changed + f.routing_changed;
    for (size_t l = 0; l < out.expert_counts.size(); ++l)
      out.expert_counts[l] = out.expert_counts[l] + f.expert_counts[l];
  }
  auto grad_norm = s.optim->ClipGradNorm(t.grad_clip);
  const double lr_scale = LrScale(s.step, t.warmup_steps, t.steps, t.min_lr_ratio);
  if (s.async_save) s.async_save->BeforeStateChanges();  // a copy may still be reading
  s.optim->Step(t.muon_lr * lr_scale, t.lr * lr_scale);
  if (t.router_bias_rate > 0) s.model->UpdateRouterBias(out.expert_counts, t.router_bias_rate);
  laps.Mark();
  // The step's one read: loss, gradient norm, the routing check, the expert load.
  const bool moe = !out.expert_counts.empty();
  std::vector<torch::Tensor> read{out.ce, grad_norm, out.routing_changed};
  if (moe) read.push_back(ExpertLoadFigures(forward_counts, s.mesh.ep));
  const auto figures = compat::ReadToHost(torch::cat(read));
  // Forward and backward of each micro-batch, then the optimizer.
  const std::vector<double> lap = laps.Finish();
  double fwd = 0, bwd = 0;
  for (int64_t i = 0; i < parts; ++i) {
    fwd += lap[2 * i];
    bwd += lap[2 * i + 1];
  }
  if (figures[2].item<double>() != 0)
    throw TrainError("step " + std::to_string(s.step + 1) +
                     ": expert routing in a layer's recompute differed from its forward, so "
                     "tokens went to the wrong expert ranks (non-deterministic router kernels?); "
                     "set parallel.activation_checkpointing = false or parallel.ep = 1");
  ++s.step;

  StepRecord r;
  r.step = s.step;
  r.loss = figures[0].item<double>();  // the global batch's mean, the same on every rank
  r.tokens = rows * t.seq_len;         // this rank's; the ranks' records add up to the step
  r.step_seconds = laps.Total();
  r.grad_norm = figures[1].item<double>();
  r.lr = t.lr * lr_scale;
  r.muon_lr = t.muon_lr * lr_scale;
  r.fwd_seconds = fwd;
  r.bwd_seconds = bwd;
  r.optim_seconds = lap[2 * parts];
  if (moe) {
    r.expert_load_max_over_mean = figures[3].item<double>();
    if (s.mesh.ep > 1) r.ep_load_max_over_mean = figures[4].item<double>();
  }
  // The step's collectives (world > 1): their time, and the part the
  // compute stood waiting for them (before a checkpoint's barriers).
  if (auto times = s.comm->TakeTimes()) {
    r.comm_seconds = times->total;
    r.exposed_comm_seconds = times->exposed;
  }
  // This rank's pinned host arenas: activation offload's, checkpoint.async's copy.
  r.host_arena_bytes = s.model->HostArenaBytes();
  if (s.async_save && s.async_save->host_bytes() > 0)
    r.host_arena_bytes = r.host_arena_bytes.value_or(0) + s.async_save->host_bytes();
  if (auto mem = compat::CudaMemory(s.device)) {
    // This step's peaks: its laps' (each read and reset at its mark) and
    // what came after the last mark.
    const auto& peaks = laps.allocated_peaks();
    r.alloc_retries = mem->alloc_retries;  // since the process started (a counter)
    r.mem_allocated_peak_bytes =
        std::max(mem->allocated_peak,
                 peaks.empty() ? int64_t{0} : *std::max_element(peaks.begin(), peaks.end()));
    r.mem_reserved_peak_bytes = std::max(mem->reserved_peak, laps.reserved_peak());
    if (auto phases = PeaksByPhase(peaks, parts)) {
      r.mem_allocated_peak_fwd_bytes = phases->forward;
      r.mem_allocated_peak_bwd_bytes = phases->backward;
      r.mem_allocated_peak_optim_bytes = phases->optimizer;
    }
  }
  CheckpointAfterStep(&r);
  if (s.checkpoint_step >= 0) r.checkpoint_step = s.checkpoint_step;
  r.next_checkpoint_step = NextCheckpointStep();
  if (s.nccl_log) {
    // NCCL sets a communicator up at its first collective: after the first
    // step its log has the channel counts (read until found, a bounded number
    // of times).
    const bool looking = !s.nccl_log->done();
    const auto channels = s.nccl_log->Poll();
    if (channels) r.nccl_max_ctas = channels->coll;
    if (looking && s.nccl_log->done() && s.options.on_note) {
      if (channels) {
        s.options.on_note(
            "NCCL: " + std::to_string(channels->coll) + " CTAs per collective (coll channels, " +
            "the most of " + std::to_string(channels->communicators) + " communicator" +
            (channels->communicators == 1 ? "" : "s") + ")" +
            (channels->p2p_per_peer
                 ? ", " + std::to_string(*channels->p2p_per_peer) + " p2p channels per peer"
                 : "") +
            ", from " + s.nccl_log->path());
      } else {
        s.options.on_note("NCCL: no channel count in " + s.nccl_log->path() + " after " +
                          std::to_string(NcclLogFollower::kMaxPolls) +
                          " steps; nccl_max_ctas is not reported");
      }
    }
  }
  if (s.options.on_expert_load) {
    std::vector<std::vector<std::vector<int64_t>>> load(forward_counts.size());
    for (size_t i = 0; i < forward_counts.size(); ++i) {
      for (const auto& c : forward_counts[i]) {
        const auto host = c.to(torch::kCPU, torch::kLong).contiguous();
        load[i].emplace_back(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
      }
    }
    s.options.on_expert_load(s.step, load);
  }
  if (s.options.on_step) s.options.on_step(r);
}

}  // namespace trellis::train
