#pragma once
// The step record of the rank contract: one JSON object per rank per step,
// newline-delimited, written to TRELLIS_STEP_SOCKET. Torch-free, absl-free.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trellis {

inline constexpr int kStepRecordVersion = 1;
// A line longer than this is refused without parsing it (bounded decoder).
inline constexpr size_t kMaxStepRecordBytes = 4096;

struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  int64_t tokens = 0;
  double step_seconds = 0;
  // Optional fields: present only where the producer knows them.
  std::optional<double> grad_norm;
  std::optional<double> fwd_seconds;
  std::optional<double> bwd_seconds;
  std::optional<double> optim_seconds;
  std::optional<double> comm_seconds;
  std::optional<double> exposed_comm_seconds;
  // MoE routing over the step's tokens (all ranks), the worst layer: the
  // busiest expert's tokens over the mean expert's, and the busiest EP rank's
  // (a block of experts) over the mean EP rank's (only where EP > 1), each
  // forward's busiest summed over the step's micro-batches. 1 is even; the
  // EP figure is what the slowest GPU pays.
  std::optional<double> expert_load_max_over_mean;
  std::optional<double> ep_load_max_over_mean;
  std::optional<int64_t> alloc_retries;
  std::optional<int64_t> mem_allocated_peak_bytes;
  std::optional<int64_t> mem_reserved_peak_bytes;
  // The allocated peak of each part of the step (GPU): the largest forward,
  // the largest backward (with any recompute) and the optimizer's. The
  // step's mem_allocated_peak_bytes is the largest of them (or a little
  // above, from the step's last bookkeeping).
  std::optional<int64_t> mem_allocated_peak_fwd_bytes;
  std::optional<int64_t> mem_allocated_peak_bwd_bytes;
  std::optional<int64_t> mem_allocated_peak_optim_bytes;
  std::optional<int64_t> host_arena_bytes;
  std::optional<int64_t> nccl_max_ctas;
  std::optional<int64_t> checkpoint_step;
  // Seconds the rank spent on checkpoints after this step, outside
  // step_seconds: a checkpoint written in place, whole; one written behind
  // the steps (checkpoint.async), starting its copy and completing its step,
  // waits for a write still in flight included. Absent on steps without.
  std::optional<double> checkpoint_seconds;
};

// The decoder's bounds on a record that arrived another way (the
// controller's copy of a worker's record): counts >= 0, times and norms
// finite and >= 0, loss finite. On failure sets *error naming the field.
bool CheckStepRecord(const StepRecord& record, std::string* error);

// One line, no trailing newline.
std::string EncodeStepRecord(const StepRecord& record);

// Strict: the line must be one JSON object with "v": 1, the four required
// fields, known optional fields of the right type and range, nothing else.
// On failure returns nullopt and sets *error to a message naming the field.
std::optional<StepRecord> DecodeStepRecord(std::string_view line, std::string* error);

}  // namespace trellis
