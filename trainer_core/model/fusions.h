#pragma once
// The fused paths of the trainer (trainer_core/README.md, "On CUDA"), each
// on by default and each switchable off on its own, so that a benchmark can
// measure what one fusion gains against the same build:
//   TRELLIS_FUSIONS_OFF=moe_kernels,chunked_ce,bf16_weights,muon_update,swiglu,rope,
//                       sdpa_gqa,gate_up_gemm,ce_kernel,expert_wgrad,rms_norm,
//                       cross_layer_norm,qkv_dgrad_sum,clip_in_momentum,ns_apply
//                       (or "all")
// Switching one off gives the same function computed the plain ATen way.
// Torch-free.

#include <string>
#include <string_view>

namespace trellis::train {

struct Fusions {
  // The MoE dispatch, its backward and the gate-weighted combine (forward
  // and backward) as kernels of kernels/ (CUDA bf16, built with kernels/).
  bool moe_kernels = true;
  // The head and cross entropy in chunks of rows, never the whole [N, vocab]
  // logits in memory.
  bool chunked_ce = true;
  // A bf16 copy of the weights, refreshed once per optimizer step, used by
  // every forward instead of a cast per forward (bf16 compute).
  bool bf16_weights = true;
  // Muon's momentum, Nesterov update, decay and apply on the expert shards
  // in two passes of kernels/ (built with kernels/), the apply also writing
  // the bf16 weight copy.
  bool muon_update = true;
  // The MoE experts' silu(gate) * up, forward and backward, as one kernel
  // each of kernels/ (CUDA bf16, built with kernels/). Either way backward
  // keeps only gate and up and recomputes the sigmoid (model/swiglu_op.h).
  bool swiglu = true;
  // RoPE on q and k as one kernel of kernels/ per pass (CUDA bf16, built
  // with kernels/), fp32 inside, in place of a strided product per half.
  bool rope = true;
  // Grouped-query attention inside the fused attention op (LibTorch >= 2.5,
  // plain causal attention: no document mask), where k and v are otherwise
  // repeated to every query head and their gradients summed back.
  bool sdpa_gqa = true;
  // Each expert's gate and up projections as one grouped GEMM of twice the
  // width, on bf16 weight copies laid out for it (parallel/expert_form.h;
  // needs bf16_weights), and SwiGLU reading the two halves in place: one
  // GEMM fewer in forward and two in backward, and no sum of two input
  // gradients.
  bool gate_up_gemm = true;
  // Each chunk's cross entropy and its gradient (softmax - onehot, written
  // over the bf16 logits) as one kernel of kernels/cross_entropy (CUDA bf16,
  // built with kernels/), in place of log_softmax, gather, exp and scatter.
  bool ce_kernel = true;
  // The routed experts' weight gradients summed straight into the fp32
  // gradient by backward's own GEMMs (kernels/expert_wgrad, model/
  // expert_wgrad.h): no bf16 weight gradient per micro-batch and no pass
  // adding it into fp32. One rank with experts in compute form (needs
  // gate_up_gemm; built with kernels/).
  bool expert_wgrad = true;
  // RMSNorm as kernels of kernels/rms_norm (CUDA bf16, built with kernels/):
  // the residual add before the experts' norm in the same forward pass,
  // and in backward one pass for the input's gradient, the residual's added
  // to it, and the weight's (model/rms_norm_op.h).
  bool rms_norm = true;
  // Each layer's last residual add (its MoE output) left to the next
  // layer, whose attention norm adds it in the same pass (AddRmsNorm; one
  // pass fewer per layer in forward and in backward). Layers checkpointed
  // for recompute still add it themselves: the checkpoint keeps one tensor.
  bool cross_layer_norm = true;
  // The attention input's gradient from q, k and v's projections summed by
  // the GEMMs themselves (addmm into one buffer), not by two adds after them
  // (model/attention.cc).
  bool qkv_dgrad_sum = true;
  // The global-norm clip factor applied to the expert gradients by Muon's
  // momentum pass as it reads them (a device scalar), not by a pass of its
  // own over them (needs muon_update; parallel/shard_optim.cc).
  bool clip_in_momentum = true;
  // Muon's apply reading the expert Newton-Schulz result in bf16, as the
  // products leave it (transposed for down), with no fp32 copy of it in
  // memory (kernel Newton-Schulz and muon_update; optim/ns_kernel.h).
  bool ns_apply = true;
};

// The names above, comma-separated ("" or none: every fusion on; "all": all
// off). An unknown name throws TrainError naming it and the accepted names.
Fusions ParseFusionsOff(std::string_view off);

// The names switched off, comma-separated ("" when none): for logs and
// benchmark records.
std::string DescribeFusionsOff(const Fusions& f);

// TRELLIS_FUSIONS_OFF of this process, read once.
const Fusions& ActiveFusions();

}  // namespace trellis::train
