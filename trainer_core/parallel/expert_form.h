#pragma once
// Two layouts of an owner's block of routed experts (count experts, each
// gate [F, H], up [F, H] and down [H, F]; FH = F * H elements a matrix):
//   stored:  [gate, up, down][count][FH]: the fp32 master, its gradient and
//            the optimizer's state, one matrix after another per part;
//   compute: [count][gate; up] ([count][2 FH]), then [count][down]: each
//            expert's gate and up rows adjacent, so a gathered block views
//            as [E, 2F, H] and one grouped GEMM computes both projections
//            (the gate_up_gemm fusion). Only the bf16 weight copy that
//            forward gathers, and its gradient, take this layout.
// Blocks are flat [3 * count * FH] tensors; gathered ones are `owners`
// blocks end to end.

#include "trainer_core/model/layers.h"
#include "trainer_core/torch_api.h"

namespace trellis::train::expert_form {

// The compute form's layout id in CastCache (0 is the stored order).
constexpr int kCastLayout = 1;

// Part `part` (0 gate, 1 up, 2 down) of a compute-form block as [count, FH]:
// rows 2 FH apart for gate and up, dense for down.
torch::Tensor Part(const torch::Tensor& form, int64_t count, int part);

// form = the stored block `stored` in compute form (and form's dtype).
void Write(const torch::Tensor& stored, torch::Tensor& form, int64_t count);

// into (stored layout, fp32) += grad (compute form); into undefined: the
// step's first contribution, a new fp32 tensor in the stored layout. The
// second form takes the block's two parts apart: gate_up [count * 2 FH] and
// down [count * FH], both contiguous.
void AddTo(torch::Tensor& into, const torch::Tensor& grad, int64_t count);
void AddTo(torch::Tensor& into, const torch::Tensor& gate_up, const torch::Tensor& down,
           int64_t count);

// The experts of `owners` gathered compute-form blocks as stacked weights,
// gate_up [owners * count, 2F, H] and down [owners * count, H, F], views for
// one owner. Differentiable: backward writes the blocks' gradient in one
// pass (split's, as unbind's in the stored layout).
ExpertWeights Views(const torch::Tensor& gathered, int64_t owners, int64_t count, int64_t f,
                    int64_t h);

}  // namespace trellis::train::expert_form
