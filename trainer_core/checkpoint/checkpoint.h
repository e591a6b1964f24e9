#pragma once
// Checkpoints: <dir>/step-NNNNNNNN/ holds the shard file(s) and manifest.json.
// The shards are written first, the manifest last (temp name, fsync, rename):
// a step counts only when its manifest exists, so a crash mid-save leaves the
// previous checkpoint as the latest.

#include <functional>
#include <string>

#include "common/spec/trainer_spec.h"
#include "trainer_core/optim/optim.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// 2: per-rank shards, mesh in the manifest; 3: shards of version 2 (XXH64),
// recorded in the manifest by their index's checksum. Version 2 is still read.
inline constexpr int kCheckpointVersion = 3;
inline constexpr int kOldestCheckpointVersion = 2;

// What a checkpoint holds besides tensors.
struct CheckpointMeta {
  int64_t step = 0;              // steps completed
  int64_t rows_consumed = 0;     // data position
  uint64_t corpus_checksum = 0;  // the corpus it was trained on
  uint32_t corpus_version = 0;   // its file's format version; 0: not recorded (before it was)
  int shard_files_read = 0;      // by LoadCheckpoint: the shards this rank needed
  uint64_t bytes_read = 0;
};

// The mesh a checkpoint was written on: enough to know which elements of
// every tensor each rank held.
struct MeshInfo {
  int world = 1, node_size = 1, ep = 1;
};

// Elements [begin, end) of a tensor's logical (whole-model) flat form.
struct Range {
  int64_t begin = 0, end = 0;
};
// Which logical elements rank `rank` of `mesh` holds for the named tensor, in
// the order its shard stores them.
using RangesFn =
    std::function<std::vector<Range>(const std::string& name, const MeshInfo& mesh, int rank)>;

// How this process's tensors relate to the whole: no comm means world 1 with
// every tensor whole.
struct Sharding {
  Comm* comm = nullptr;
  MeshInfo mesh;
  RangesFn ranges;
};

std::string StepDir(const std::string& dir, int64_t step);
// Newest step with a manifest, or -1 when there is none.
int64_t LatestCompleteStep(const std::string& dir);

class CheckpointPruner;

// Every rank saves its `state` (every tensor it needs to continue) as
// shard-RRRRR-of-WWWWW.bin; after all have, rank 0 writes the manifest and
// prunes all but the newest `keep` complete checkpoints (pruner.h: with a
// `pruner`, removed by its thread; without, before returning). Collective. Throws
// TrainError. Tensors go to the file in pieces (through two pinned buffers
// from a GPU), never staged whole in host memory. Returns the bytes of this
// rank's shard.
uint64_t SaveCheckpoint(const std::string& dir, const spec::TrainerSpec& spec,
                        const CheckpointMeta& meta, const NamedTensors& state, int keep,
                        const Sharding& sharding = {}, CheckpointPruner* pruner = nullptr);
// The three parts of SaveCheckpoint, for a save written behind the steps
// (async_save.h). BeginStep (collective) makes the step's directory and
// removes a manifest an earlier save of the same step left, before any rank
// writes; it returns the step's directory. WriteShard writes this rank's
// shard there (not collective, any thread; `cancelled`, when given, is asked
// between 64 MiB pieces and abandons the shard with a TrainError).
// CompleteStep (collective) gives rank 0 every shard's size and checksum;
// it writes the manifest and prunes, and every rank returns once the step
// is complete.
struct ShardWritten {
  uint64_t bytes = 0;        // the shard file's size
  uint64_t index_xxh64 = 0;  // its index's checksum, for the manifest
};
std::string BeginStep(const std::string& dir, int64_t step, Comm* comm);
ShardWritten WriteShard(const std::string& step_dir, const NamedTensors& state, int rank,
                        int world, const std::function<bool()>& cancelled = {});
void CompleteStep(const std::string& dir, const spec::TrainerSpec& spec,
                  const CheckpointMeta& meta, int keep, const Sharding& sharding,
                  const ShardWritten& mine, CheckpointPruner* pruner = nullptr);

// "checkpoint step 10 written in 2.1 s: 3.10 GiB (1.48 GiB/s, checksums, the
// copy from the device and fsync included)", for the rank's log.
std::string DescribeSave(int64_t step, uint64_t bytes, double seconds);

// Verifies the manifest against `spec` (model shape, seq_len, global_batch,
// seed), then fills every tensor of `state` from the shards. The checkpoint
// may come from another mesh (world size): each tensor's elements are found
// through `sharding.ranges` of the saved mesh and copied where this rank's
// ranges want them (resharding). Throws TrainError naming the file and the
// mismatching field or tensor. Only the shards and entries this rank needs
// are read; a tensor laid out as it was saved is read straight into place
// (through two pinned buffers to a GPU).
// "checkpoint step 10 read in 4.2 s: 4.71 GiB from 1 shard file (1.12 GiB/s,
// checksums and the copy to the device included)", for the rank's log.
std::string DescribeLoad(const CheckpointMeta& meta, double seconds);

// What of the spec identity a checkpoint must match: all of it (a resume), or
// the model's shape only (weights taken into another run: training.init_from).
enum class SpecMatch { kWhole, kModel };

CheckpointMeta LoadCheckpoint(const std::string& dir, int64_t step, const spec::TrainerSpec& spec,
                              const NamedTensors& state, const Sharding& sharding = {},
                              SpecMatch match = SpecMatch::kWhole);

// What LoadCheckpoint checks first, with no tensor read and no peer: the step's
// manifest exists and parses, and the spec identity matches. A rank checks a
// resume so before it meets its peers, so that a resume that cannot work ends
// every rank at once with its reason. Returns step, rows_consumed and
// corpus_checksum; throws TrainError as LoadCheckpoint does.
CheckpointMeta CheckCheckpoint(const std::string& dir, int64_t step,
                               const spec::TrainerSpec& spec,
                               SpecMatch match = SpecMatch::kWhole);

}  // namespace trellis::train
