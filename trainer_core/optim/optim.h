#pragma once
// Muon for weight matrices (except the router), AdamW for the rest, and the
// global gradient norm with clipping. Parameters are slices of the model's
// block buffers; state tensors are named so checkpoints can find them.

#include <string>
#include <utility>
#include <vector>

#include "trainer_core/model/model.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// One parameter as an optimizer sees it: a slice of a block buffer.
struct ParamSlot {
  std::string name;    // full name, e.g. "layers.0.wq"
  torch::Tensor flat;  // the block's leaf buffer
  ParamInfo info;
  torch::Tensor Value() const;  // view of the data (no autograd)
  torch::Tensor Grad() const;   // view of the gradient
};

// The slots of every parameter whose layout entry names `optim`.
std::vector<ParamSlot> SlotsFor(const std::vector<Block>& blocks, Optim optim);

// Quintic Newton-Schulz iteration towards the orthogonal polar factor U V^T of
// each matrix in the last two dims (batched over leading dims), computed in
// `dtype`; result in g's dtype. Coefficients (3.4445, -4.7750, 2.0315) trade
// exactness for speed: singular values land in a band around 1, not on 1.
torch::Tensor NewtonSchulz(const torch::Tensor& g, int steps, torch::Dtype dtype);

struct MuonOptions {
  double momentum = 0.95;  // Nesterov
  int ns_steps = 5;
  torch::Dtype ns_dtype = torch::kFloat;
  double weight_decay = 0;
};

class Muon {
 public:
  Muon(std::vector<ParamSlot> params, MuonOptions options);
  void Step(double lr);
  NamedTensors State();  // "muon.momentum.<param>"

 private:
  std::vector<ParamSlot> params_;
  std::vector<torch::Tensor> momentum_;
  MuonOptions options_;
};

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0;
};

class AdamW {
 public:
  AdamW(std::vector<ParamSlot> params, AdamWOptions options);
  void Step(double lr);
  NamedTensors State();  // "adamw.step", "adamw.m.<param>", "adamw.v.<param>"

 private:
  std::vector<ParamSlot> params_;
  std::vector<torch::Tensor> m_, v_;
  torch::Tensor step_;  // int64 [1], a tensor so it checkpoints like the rest
  AdamWOptions options_;
};

// Global L2 norm of all gradients (before clipping); scales them down to
// `max_norm` when above it. max_norm 0 never clips.
double ClipGradNorm(std::vector<Block>& blocks, double max_norm);

}  // namespace trellis::train
