#pragma once
// The trainer a host drives: build it from a spec and a step-record callback,
// run N steps, checkpoint, resume. Torch-free header (PIMPL), so hosts
// include it without paying LibTorch's compile time.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/spec/trainer_spec.h"
#include "common/step_record.h"
#include "trainer_core/parallel/comm.h"

namespace trellis::train {

using StepCallback = std::function<void(const StepRecord&)>;

// True when `training.device` trains on CUDA here ("cuda", or "auto" with a
// device present). Such ranks meet over NCCL; the others over gloo.
bool TrainsOnCuda(const spec::TrainingSpec& training);

// For a rank about to connect: picks NCCL when it trains on CUDA, and makes
// its GPU current: the one CUDA_VISIBLE_DEVICES leaves it (Trellis's worker
// gives each rank one), else LOCAL_RANK's among those it sees.
void ChooseRankDevice(const spec::TrainingSpec& training, CommOptions* comm);

inline constexpr int64_t kStartFresh = -1;
inline constexpr int64_t kResumeLatest = -2;  // newest complete checkpoint, or fresh if none

class Comm;

struct TrainerOptions {
  std::string checkpoint_dir;         // empty: never checkpoint
  int64_t resume_step = kStartFresh;  // a step number, kStartFresh or kResumeLatest
  StepCallback on_step;               // called once per step, after the optimizer
  Comm* comm = nullptr;               // the ranks (parallel/comm.h), met by the caller
  // With no `comm`: the ranks the trainer meets itself (world 1 by default),
  // once it has checked what a rank can check alone (the spec against the
  // corpus and any checkpoint it resumes), so that bad input ends every rank
  // with its reason and none waits on a peer that already left.
  CommOptions connect;
  int local_world_size = 0;           // ranks per node, the default parallel.node_size; 0: world
  // NCCL's log file (SetUpNcclLog's follow, parallel/nccl_log_file.h): read
  // after the first steps until a communicator's channel count is found, which
  // every later step record carries as nccl_max_ctas. Empty: not reported.
  std::string nccl_log;
  // A line of news for the rank's log (stderr), without a newline: NCCL's
  // channel count once found, each checkpoint write and read with its time.
  // None: not said.
  std::function<void(const std::string&)> on_note;
  // Asked after every step: true on any rank stops all of them at that step
  // boundary (one all-reduce of a flag a step agrees on it), with a
  // checkpoint. The rank host sets it from Slurm's wall-time warning
  // (SIGUSR1). None: Run goes to its last step.
  std::function<bool()> stop_requested;
  // The mean seconds between failures of the run's nodes together, for
  // checkpoint.every_steps = "auto" (TRELLIS_MTBF_S, from the controller's
  // failure history). 0: unknown, taken as kDefaultNodeMtbfHours per node.
  double mtbf_s = 0;
  // The controller's data roots (TRELLIS_DATA_ROOTS for a hosted rank): the
  // corpus must lie under one, checked on the file as the rank opens it
  // (RefusedInput otherwise). Empty: not checked (trellis-train alone).
  std::vector<std::string> data_roots;
  // For measurements (bench/routing): after each step, the tokens routed to
  // each expert of each layer in each forward (micro-batch) of that step,
  // over all ranks ([forward][layer][expert]). Costs a host read of the
  // counts per step where set. None: not read.
  std::function<void(int64_t step,
                     const std::vector<std::vector<std::vector<int64_t>>>& forwards)>
      on_expert_load;
};

// True when `comm` meets its peers over NCCL (a CUDA world of 2 or more):
// such a rank calls SetUpNcclLog before ConnectComm.
inline bool MeetsOverNccl(const CommOptions& comm) { return comm.cuda && comm.world > 1; }

// Every method throws TrainError (error.h) with a message naming the file or
// field at fault; LibTorch's own errors are converted to it.
class Trainer {
 public:
  Trainer(const spec::TrainerSpec& spec, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  int64_t step() const;                  // steps completed
  int64_t last_checkpoint_step() const;  // -1 when none
  std::string Describe() const;          // one line: sizes, device, dtypes
  // One line naming the rank's device: on CUDA the GPU (index, name, PCI bus
  // id) and how it was chosen (CUDA_VISIBLE_DEVICES, LOCAL_RANK), so that a
  // run's logs show every rank on a GPU of its own; else that it is the CPU.
  std::string DescribeDevice() const;

  // Trains until step() == min(last_step, training.steps), or until the
  // ranks agree to stop (options.stop_requested). Checkpoints every
  // checkpoint.every_steps, or as "auto" chooses (behind the steps with checkpoint.async; such a
  // save still in flight is completed before it returns) and when it
  // returns (if a directory is set; on a stop always). True when it stopped
  // before its last step.
  bool Run(int64_t last_step);
  // A checkpoint of the current step, written in place (collective).
  void SaveCheckpoint();

 private:
  struct State;
  std::unique_ptr<State> s_;
  void Step();
  bool StopAgreed();
  // trainer_checkpoints.cc
  void SetUpSaveBehind();
  void CheckpointAfterStep(StepRecord* record);
  int64_t NextCheckpointStep() const;
  bool AutoCheckpointDue(double step_seconds);
  void ChooseAutoInterval(double cost_seconds, StepRecord* record);
  void CheckpointAtTheEnd(bool stopped);
};

}  // namespace trellis::train
