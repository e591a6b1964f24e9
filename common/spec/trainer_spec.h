#pragma once
// The trainer's sections of a run spec: [model], [parallel], [training],
// [checkpoint]. Shared by the controller (validation), the worker (`[model]`
// mode) and trellis-train. Torch-free.

#include <cstdint>
#include <string>

#include <toml++/toml.h>

#include "common/spec/field_errors.h"

namespace trellis::spec {

struct ModelSpec {
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int kv_heads = 2;
  int experts = 4;
  int experts_per_token = 2;
  int expert_hidden = 128;
  int vocab = 256;
  bool shared_expert = false;
};

struct ParallelSpec {
  int node_size = 0;  // 0: the run's ranks_per_node
  int ep = 0;         // 0: node_size
};

struct TrainingSpec {
  int seq_len = 128;
  int global_batch = 8;
  int64_t steps = 100;
  double lr = 3e-3;
  uint64_t seed = 1234;
  std::string data;  // corpus path (read-only input)
};

struct CheckpointSpec {
  int64_t every_steps = 0;  // 0: only at the end
  int keep = 2;
};

struct TrainerSpec {
  ModelSpec model;
  ParallelSpec parallel;
  TrainingSpec training;
  CheckpointSpec checkpoint;
};

// Reads the four trainer sections from a run spec's root table. Absent
// sections keep their defaults; other sections of the root are ignored here.
TrainerSpec ParseTrainerSections(const toml::table& root, FieldErrors* errors);

}  // namespace trellis::spec
