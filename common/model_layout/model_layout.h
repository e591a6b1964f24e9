#pragma once
// The model's parameters as a table, llm.c style: the model is a list of
// blocks (embedding, one per layer, final norm + head); each block's
// parameters live in one flat buffer at fixed offsets. A host that shards
// the model gathers one block's buffer and views the weights out of it.
// Torch-free, and here rather than in trainer_core: the trainer builds its
// model from it and the launch gate counts a rank's host memory from it
// (rank_host_memory.h), from the same table.

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/trainer_spec.h"

namespace trellis::train {

enum class Optim { kMuon, kAdamW };
enum class Init { kNormal, kOnes };

struct ParamInfo {
  std::string name;            // short name inside the block, e.g. "wq"
  std::vector<int64_t> shape;  // [out, in] for matrices; [experts, out, in] for experts
  int64_t offset = 0;          // in elements, inside the block's buffer
  int64_t numel = 0;
  Init init = Init::kNormal;
  double std = 0;
  Optim optim = Optim::kAdamW;
  bool decay = false;  // decoupled weight decay applies
};

struct BlockLayout {
  std::string name;  // "embed", "layers.3", "final"
  std::vector<ParamInfo> params;
  int64_t numel = 0;

  const ParamInfo& Find(const std::string& short_name) const;  // crashes if absent
  std::string FullName(const ParamInfo& p) const { return name + "." + p.name; }
};

std::vector<BlockLayout> ModelLayout(const spec::ModelSpec& m);

// Elements of a block before its routed experts (w_gate, w_up, w_down come
// last in a layer block); the whole block for embed and final.
int64_t DenseNumel(const BlockLayout& block);

// Parameters touched per token: attention + top-k experts (+ shared), for MFU.
int64_t ActiveParamsPerToken(const spec::ModelSpec& m);

}  // namespace trellis::train
