#pragma once
// The parts of LibTorch the trainer uses, included instead of <torch/torch.h>:
// tensors and their factories, autograd functions and grad, the no-grad guard
// and seeding, torch::cuda. <torch/torch.h> adds the nn modules, optimizers,
// data loaders and serialization, which the trainer does not use, at twice
// the parse time in each of the ~50 translation units that include this
// (docs/architecture.md, "Building").

#include <torch/autograd.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>
