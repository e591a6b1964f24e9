#pragma once
// training.init_from as a rank reads it: a checkpoint directory and step of
// another run (or of trellis-train), and what is taken from it
// (training.init_state). Used only while the run has no checkpoint of its
// own; its relaunches resume from those.

#include <cstdint>
#include <string>

#include "common/spec/trainer_spec.h"
#include "trainer_core/checkpoint/checkpoint.h"

namespace trellis::train {

struct InitSource {
  std::string dir;
  int64_t step = -1;
  std::string state;   // training.init_state: "weights", "weights_optimizer", "all"
  CheckpointMeta meta;  // its manifest's
  SpecMatch match() const { return state == "all" ? SpecMatch::kWhole : SpecMatch::kModel; }
};

// "DIR@STEP", "DIR@latest" or "DIR" (latest), its step found and its manifest
// checked against the spec (the model's shape; all of the identity for
// "all"), before any peer is met. Throws TrainError naming what is wrong.
InitSource CheckedInitSource(const spec::TrainerSpec& spec);

// The names of `all` that init_state takes: the model's weights (and the
// router's balancing bias) for "weights", everything otherwise.
NamedTensors InitStateOf(const NamedTensors& all, const std::string& init_state);

}  // namespace trellis::train
