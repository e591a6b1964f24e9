// The trainer's checkpoints: in place, or behind the steps
// (checkpoint.async) where the host copy fits; the last one of a run.
#include <chrono>
#include <cstdint>
#include <string>

#include "common/checkpoint_interval.h"
#include "trainer_core/memory/activation_offload.h"
#include "trainer_core/memory/host_room.h"
#include "trainer_core/trainer.h"
#include "trainer_core/trainer_state.h"

namespace trellis::train {

// checkpoint.async's writer, when the host copy of the state fits every
// rank's host memory, the copies of the ranks that share a socket or a host
// counted together (a copy that would not fit is not taken: a rank bound to
// a socket is killed when the socket runs out). Ranks agree, as the two ways
// of saving take different collectives.
void Trainer::SetUpSaveBehind() {
  State& s = *s_;
  const auto& c = s.spec.checkpoint;
  if (!c.SavesBehindTheSteps() || s.options.checkpoint_dir.empty()) return;
  const NamedTensors state = s.AllState();
  // The activation offload's arena, made at the first forward, takes the
  // same memory: a micro-batch's layer input per offloaded layer.
  const auto& t = s.spec.training;
  const int64_t rows = t.micro_batch > 0 ? t.micro_batch : t.global_batch / s.comm->size();
  const int64_t offload = OffloadArenaBytes(
      OffloadedLayers(s.spec.parallel.offload_fraction, s.spec.model.layers),
      rows * t.seq_len * s.spec.model.hidden * c10::elementSize(s.compute_dtype));
  const std::string why = WhyTheCopyDoesNotFit(
      state, offload,
      static_cast<int64_t>(c.async_keep_free_gib * static_cast<double>(1ull << 30)),
      ReadMemoryBoundsCounted(s.shared_bounds));
  const int short_ranks = s.RanksSaying(!why.empty());
  if (short_ranks > 0) {
    if (s.options.on_note)
      s.options.on_note(
          "checkpoint.async: the host copy of the state" +
          (offload > 0 ? std::string(" (with activation offload's arena)") : "") +
          " does not fit " +
          (why.empty() ? "on " + std::to_string(short_ranks) + " of " +
                             std::to_string(s.comm->size()) + " ranks"
                       : "this rank's memory: " + why) +
          " (checkpoint.async_keep_free_gib); every rank writes its checkpoints in place");
    return;
  }
  s.async_save = std::make_unique<AsyncCheckpointWriter>(
      s.options.checkpoint_dir, s.spec, c.keep, s.CheckpointSharding(), s.device.is_cuda(),
      &s.pruner);
  s.async_save->Prepare(state);  // the host copy's memory, beside the first steps
}

// The step boundary's checkpoint work: a save behind the steps completed
// once every rank's shard is written, and every_steps' save (behind the
// steps with checkpoint.async). The seconds it took go in the record.
void Trainer::CheckpointAfterStep(StepRecord* record) {
  State& s = *s_;
  const auto& c = s.spec.checkpoint;
  const bool checkpoints = !s.options.checkpoint_dir.empty();
  const bool due = checkpoints && (c.every_steps_auto
                                       ? AutoCheckpointDue(record->step_seconds)
                                       : c.every_steps > 0 && s.step % c.every_steps == 0);
  const bool in_flight = s.async_save && s.async_save->in_flight();
  if (!due && !in_flight) return;
  const auto start = std::chrono::steady_clock::now();
  if (!s.async_save) {
    SaveCheckpoint();
  } else if (due) {
    s.NoteSaveBehind(s.async_save->Begin(
        {s.step, s.data->RowsBefore(s.step), s.corpus.checksum, s.corpus.version},
        s.AllState()));
  } else {
    s.NoteSaveBehind(s.async_save->Poll(/*wait=*/false));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record->checkpoint_seconds = seconds;
  if (due && c.every_steps_auto) ChooseAutoInterval(seconds, record);
}

// The step after which this rank writes its next checkpoint (0: none ahead),
// in every record: the controller allows for it in the hang timeout
// (docs/architecture.md, "Hangs: learned timeouts"). The record of the last
// step says that step when the end's checkpoint (or one behind the steps,
// waited for) is still to come after it. A stop's checkpoint cannot be
// foreseen; the worker says when it passes a stop on.
int64_t Trainer::NextCheckpointStep() const {
  const State& s = *s_;
  const auto& c = s.spec.checkpoint;
  if (s.options.checkpoint_dir.empty()) return 0;
  const int64_t end = s.run_last_step >= 0 ? s.run_last_step : s.spec.training.steps;
  if (s.step >= end) {
    const bool behind = s.async_save && s.async_save->in_flight();
    return (c.at_end && s.checkpoint_step != s.step) || behind ? s.step : 0;
  }
  int64_t next = c.at_end ? end : 0;
  int64_t periodic = 0;
  if (c.every_steps_auto)
    periodic = s.auto_checkpoints.next_step > s.step ? s.auto_checkpoints.next_step : 0;
  else if (c.every_steps > 0)
    periodic = (s.step / c.every_steps + 1) * c.every_steps;
  if (periodic > 0 && (next == 0 || periodic < next)) next = periodic;
  return next;
}

// every_steps = "auto": whether this step's checkpoint is due. The launch's
// first step (start-up, allocations) is not timed; after two timed steps the
// ranks agree on the step time, and the launch's first checkpoint comes
// auto_min_s of steps later: nothing is measured before it, and auto never
// chooses a shorter period. Collective at the same step on every rank.
bool Trainer::AutoCheckpointDue(double step_seconds) {
  State& s = *s_;
  State::AutoCheckpoints& a = s.auto_checkpoints;
  if (a.launch_steps++ > 0) {
    a.seconds += step_seconds;
    ++a.timed;
  }
  if (a.next_step < 0 && a.timed == 2) {
    const double step_s = s.MaxOverRanks({a.MeanStep()})[0];
    a.next_step = s.step + FirstAutoCheckpointSteps(step_s, s.spec.checkpoint.auto_min_s);
  }
  return s.step == a.next_step;
}

// After an auto checkpoint: the next interval, by Young's rule on what this
// one cost and the steps since the last choice, the slowest rank's of each
// (every rank chooses the same), said in the record and the rank's log.
void Trainer::ChooseAutoInterval(double cost_seconds, StepRecord* record) {
  State& s = *s_;
  State::AutoCheckpoints& a = s.auto_checkpoints;
  const auto& c = s.spec.checkpoint;
  const std::vector<double> agreed =
      s.MaxOverRanks({cost_seconds, a.timed > 0 ? a.MeanStep() : record->step_seconds});
  const int nodes = std::max(1, s.comm->size() / std::max(1, s.mesh.node_size));
  CheckpointIntervalInput in;
  in.cost_s = agreed[0];
  in.step_s = agreed[1];
  in.mtbf_s = s.options.mtbf_s > 0 ? s.options.mtbf_s : kDefaultNodeMtbfHours * 3600 / nodes;
  in.min_s = c.auto_min_s;
  in.max_s = c.auto_max_s;
  const CheckpointInterval out = ChooseCheckpointInterval(in);
  a.next_step = s.step + out.steps;
  a.timed = 0;
  a.seconds = 0;
  record->checkpoint_every_steps = out.steps;
  record->checkpoint_choice_cost_seconds = in.cost_s;
  record->checkpoint_choice_step_seconds = in.step_s;
  if (s.options.on_note)
    s.options.on_note("checkpoint.every_steps = \"auto\" after step " + std::to_string(s.step) +
                      ": " + DescribeCheckpointInterval(in, out));
}

void Trainer::SaveCheckpoint() {
  Guard([&] {
    State& s = *s_;
    if (s.options.checkpoint_dir.empty()) throw TrainError("no checkpoint directory set");
    // A save behind the steps first: checkpoints complete in step order.
    if (s.async_save) s.NoteSaveBehind(s.async_save->Poll(/*wait=*/true));
    CheckpointMeta meta{s.step, s.data->RowsBefore(s.step), s.corpus.checksum, s.corpus.version};
    const auto start = std::chrono::steady_clock::now();
    const uint64_t bytes =
        train::SaveCheckpoint(s.options.checkpoint_dir, s.spec, meta, s.AllState(),
                              s.spec.checkpoint.keep, s.CheckpointSharding(), &s.pruner);
    // What a checkpoint costs the run, in the rank's log.
    if (s.options.on_note)
      s.options.on_note(DescribeSave(
          s.step, bytes,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    s.checkpoint_step = s.step;
  });
}

// When Run returns: a save behind the steps still in flight, and the run's
// last checkpoint (checkpoint.at_end, or at a stop).
void Trainer::CheckpointAtTheEnd(bool stopped) {
  State& s = *s_;
  const bool save_last = !s.options.checkpoint_dir.empty() &&
                         (s.spec.checkpoint.at_end || stopped) && s.checkpoint_step != s.step;
  if (s.async_save && save_last && s.async_save->in_flight() &&
      s.async_save->step_in_flight() < s.step) {
    // The last checkpoint, written in place, supersedes an older one still
    // being written: waiting for that would only delay it (and at a stop,
    // eat into the grace time before the kill). One written on every rank
    // already is completed (a collective poll, alike on every rank).
    s.NoteSaveBehind(s.async_save->Poll(/*wait=*/false));
    if (auto step = s.async_save->Abandon(); step && s.options.on_note)
      s.options.on_note("checkpoint step " + std::to_string(*step) +
                        " written behind the steps: abandoned for step " +
                        std::to_string(s.step) + "'s, written in place now");
  }
  if (s.async_save) s.NoteSaveBehind(s.async_save->Poll(/*wait=*/true));
  if (save_last && s.checkpoint_step != s.step) SaveCheckpoint();
}

}  // namespace trellis::train
