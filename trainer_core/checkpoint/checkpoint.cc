#include "trainer_core/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/checkpoint_layout.h"
#include "trainer_core/checkpoint/checkpoint_fields.h"
#include "trainer_core/checkpoint/pruner.h"
#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/checkpoint/tensor_io.h"
#include "trainer_core/compat.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

using Json = nlohmann::json;

std::string ShardName(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.bin", rank, world);
  return name;
}

}  // namespace

nlohmann::json SpecIdentity(const spec::TrainerSpec& s) {
  const auto& m = s.model;
  return {{"model.layers", m.layers},
          {"model.hidden", m.hidden},
          {"model.heads", m.heads},
          {"model.kv_heads", m.kv_heads},
          {"model.experts", m.experts},
          {"model.experts_per_token", m.experts_per_token},
          {"model.expert_hidden", m.expert_hidden},
          {"model.vocab", m.vocab},
          {"model.shared_expert", m.shared_expert},
          {"model.rope_theta", m.rope_theta},
          {"model.norm_eps", m.norm_eps},
          {"training.seq_len", s.training.seq_len},
          {"training.global_batch", s.training.global_batch},
          {"training.seed", s.training.seed}};
}

DType ToDType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return DType::kF32;
    case torch::kDouble:
      return DType::kF64;
    case torch::kBFloat16:
      return DType::kBF16;
    case torch::kLong:
      return DType::kI64;
    default:
      throw TrainError("checkpoint: unsupported tensor dtype");
  }
}

std::string StepDir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08ld", static_cast<long>(step));
  return JoinPath(dir, name);
}

int64_t LatestCompleteStep(const std::string& dir) { return NewestCompleteCheckpoint(dir); }

std::string BeginStep(const std::string& dir, int64_t step, Comm* comm) {
  const std::string step_dir = StepDir(dir, step);
  MakeDirs(step_dir);
  // Re-saving a step starts incomplete, before any rank writes its shard.
  if (!comm || comm->rank() == 0) std::remove(JoinPath(step_dir, "manifest.json").c_str());
  if (comm) comm->Barrier();
  return step_dir;
}

ShardWritten WriteShard(const std::string& step_dir, const NamedTensors& state, int rank,
                        int world, const std::function<bool()>& cancelled) {
  std::vector<ShardEntry> entries;
  for (const auto& [name, t] : state)
    entries.push_back({name, ToDType(t.scalar_type()), t.sizes().vec(), 0,
                       static_cast<uint64_t>(t.nbytes())});
  const std::string shard_path = JoinPath(step_dir, ShardName(rank, world));
  ShardWriter writer(shard_path, std::move(entries));
  if (cancelled) {
    // Host tensors only (a snapshot): in pieces, so that a cancel lands soon.
    for (const auto& [name, t] : state) {
      if (t.is_cuda() || !t.is_contiguous())
        throw TrainError("checkpoint: a cancellable shard write takes contiguous host tensors ('" +
                         name + "' is not)");
      const char* bytes = static_cast<const char*>(t.data_ptr());
      const uint64_t n = t.nbytes();
      for (uint64_t at = 0; at < n; at += kPinnedPieceBytes) {
        if (cancelled())
          throw TrainError("checkpoint shard " + shard_path + ": write cancelled, step left "
                           "incomplete");
        writer.Append(bytes + at, std::min<uint64_t>(kPinnedPieceBytes, n - at));
      }
    }
  } else {
    TensorIo io;
    for (const auto& [name, t] : state) io.Write(t, writer);
  }
  const uint64_t index_sum = writer.Finish();
  return {writer.file_bytes(), index_sum};
}

void CompleteStep(const std::string& dir, const spec::TrainerSpec& spec,
                  const CheckpointMeta& meta, int keep, const Sharding& sharding,
                  const ShardWritten& written, CheckpointPruner* pruner) {
  Comm* comm = sharding.comm;
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  // Rank 0 learns every shard's size and checksum, then completes the step.
  // On the communicator's device (NCCL moves only GPU tensors), read back
  // through the mapping (compat::ReadToHost): a save behind the steps begins
  // right after this, and a read by the copy engine on the compute stream
  // here left the next step's small reads behind that save's copy. One rank
  // has nothing to gather: its figures stay on the host.
  const bool on_gpu = comm && world > 1 && comm->cuda();
  const auto where = torch::TensorOptions(on_gpu ? torch::kCUDA : torch::kCPU).dtype(torch::kLong);
  auto mine = torch::tensor({static_cast<int64_t>(written.bytes),
                             static_cast<int64_t>(written.index_xxh64)},
                            torch::kLong)
                  .to(where.device());
  auto all = torch::empty({2 * world}, where);
  if (comm && world > 1)
    comm->AllGatherInto(mine, all);
  else
    all.copy_(mine);
  all = compat::ReadToHost(all);
  // Rank 0's failure (the manifest not written, an old checkpoint not
  // removed) reaches every rank: thrown before the last collective, it left
  // the others failing there with "a peer exited" and no reason, or waiting
  // for the collective timeout.
  std::string failure;
  if (rank == 0) {
    try {
      Json shards = Json::array();
      for (int r = 0; r < world; ++r)
        shards.push_back({{"file", ShardName(r, world)},
                          {"bytes", all[2 * r].item<int64_t>()},
                          {"index_xxh64", static_cast<uint64_t>(all[2 * r + 1].item<int64_t>())}});
      const MeshInfo& m = sharding.mesh;
      Json manifest = {
          {"format", "trellis-checkpoint"},
          {"version", kCheckpointVersion},
          {"step", meta.step},
          {"world_size", world},
          {"mesh", {{"world_size", world}, {"node_size", m.node_size}, {"ep", m.ep}}},
          {"shards", shards},
          {"spec", SpecIdentity(spec)},
          {"data",
           {{"rows_consumed", meta.rows_consumed},
            {"corpus_fnv1a64", meta.corpus_checksum},
            {"corpus_version", meta.corpus_version}}},
          // All randomness is counter-based: (seed, position) is the RNG state.
          {"rng", {{"seed", spec.training.seed}, {"counter", meta.rows_consumed}}}};
      WriteFileAtomically(JoinPath(StepDir(dir, meta.step), "manifest.json"),
                          manifest.dump(2) + "\n");
      if (pruner) {
        pruner->Prune(dir, meta.step, keep);
      } else {
        CheckpointPruner now;
        now.Prune(dir, meta.step, keep);
        now.Wait();
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Every rank returns once the step is complete (this sum is the barrier),
  // or throws with rank 0.
  if (comm && world > 1) {
    auto failed = torch::tensor({failure.empty() ? 0.0f : 1.0f}).to(where.device());
    comm->AllReduceSum(failed);
    if (rank != 0 && compat::ReadToHost(failed).item<float>() > 0)
      throw TrainError("checkpoint step " + std::to_string(meta.step) +
                       ": rank 0 could not complete it or remove the old checkpoints (rank 0's "
                       "log says why)");
  }
  if (!failure.empty()) throw TrainError(failure);
}

uint64_t SaveCheckpoint(const std::string& dir, const spec::TrainerSpec& spec,
                        const CheckpointMeta& meta, const NamedTensors& state, int keep,
                        const Sharding& sharding, CheckpointPruner* pruner) {
  Comm* comm = sharding.comm;
  const std::string step_dir = BeginStep(dir, meta.step, comm);
  const ShardWritten written =
      WriteShard(step_dir, state, comm ? comm->rank() : 0, comm ? comm->size() : 1);
  CompleteStep(dir, spec, meta, keep, sharding, written, pruner);
  return written.bytes;
}

std::string DescribeSave(int64_t step, uint64_t bytes, double seconds) {
  const double gib = static_cast<double>(bytes) / (1ull << 30);
  char text[256];
  std::snprintf(text, sizeof text,
                "checkpoint step %lld written in %.1f s: %.2f GiB (%.2f GiB/s, checksums, the copy "
                "from the device and fsync included)",
                static_cast<long long>(step), seconds, gib, seconds > 0 ? gib / seconds : 0.0);
  return text;
}

}  // namespace trellis::train
