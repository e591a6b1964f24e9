#pragma once
// How a rank's expert block travels to its peers before a layer runs
// (parallel.expert_gather_dtype): fp32 as stored, bf16, or FP8 E4M3 in blocks
// of 128 values with one fp32 scale (kernels/ref/fp8_e4m3.h), a quarter of
// fp32's bytes plus 1/32 for the scales. Every rank, the owner included,
// computes with the dequantized weights, so the model stays the same on all
// ranks; master weights, gradients and optimizer state stay fp32.

#include <string>

#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/pending.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

enum class ExpertGather { kFp32, kBf16, kFp8 };

// "float32" | "bfloat16" | "fp8" (the spec's choices, validated there).
ExpertGather ParseExpertGather(const std::string& dtype);

// shard: this rank's fp32 expert shard (contiguous); returns the fp32 block
// [comm.size() * shard.numel()], rank r's shard at r * numel.
torch::Tensor GatherExperts(Comm& comm, const torch::Tensor& shard, ExpertGather how);
// The same, started: the shard is encoded and sent now; Finish() waits and
// decodes (prefetching a layer's block while another layer computes).
PendingTensor StartGatherExperts(Comm& comm, const torch::Tensor& shard, ExpertGather how);

// The FP8 round trip alone (what GatherExperts applies to every shard), on
// the tensor's device: kernels/ on CUDA where linked, the CPU reference
// otherwise.
void QuantizeFp8(const torch::Tensor& x, torch::Tensor* codes, torch::Tensor* scales);
torch::Tensor DequantizeFp8(const torch::Tensor& codes, const torch::Tensor& scales);

}  // namespace trellis::train
