#include "trainer_core/parallel/expert_gather.h"

#include "kernels/ref/fp8_e4m3.h"
#include "trainer_core/error.h"

#ifdef TRELLIS_WITH_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "kernels/fp8_blockwise.h"
#endif

namespace trellis::train {
namespace {

namespace ref = kernels::ref;

torch::Tensor Contiguous32(const torch::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "expert gather: fp32 shards expected");
  return x.contiguous().view(-1);
}

}  // namespace

ExpertGather ParseExpertGather(const std::string& dtype) {
  if (dtype == "float32") return ExpertGather::kFp32;
  if (dtype == "bfloat16") return ExpertGather::kBf16;
  if (dtype == "fp8") return ExpertGather::kFp8;
  throw TrainError("parallel.expert_gather_dtype: must be float32, bfloat16 or fp8, got \"" +
                   dtype + "\"");
}

void QuantizeFp8(const torch::Tensor& x, torch::Tensor* codes, torch::Tensor* scales) {
  auto flat = Contiguous32(x);
  const int64_t n = flat.numel();
  *codes = torch::empty({n}, flat.options().dtype(torch::kByte));
  *scales = torch::empty({ref::Fp8NumBlocks(n)}, flat.options());
#ifdef TRELLIS_WITH_KERNELS
  if (flat.is_cuda()) {
    kernels::QuantizeFp8Blockwise(flat.data_ptr<float>(), n, codes->data_ptr<uint8_t>(),
                                  scales->data_ptr<float>(),
                                  c10::cuda::getCurrentCUDAStream().stream());
    return;
  }
#endif
  auto host = flat.cpu();
  auto q = torch::empty({n}, torch::kByte), s = torch::empty({scales->numel()}, torch::kFloat);
  ref::QuantizeFp8BlockwiseRef(host.data_ptr<float>(), n, q.data_ptr<uint8_t>(),
                               s.data_ptr<float>());
  codes->copy_(q);
  scales->copy_(s);
}

torch::Tensor DequantizeFp8(const torch::Tensor& codes, const torch::Tensor& scales) {
  const int64_t n = codes.numel();
  TORCH_CHECK(scales.numel() == ref::Fp8NumBlocks(n), "expert gather: one scale per 128 codes");
  auto out = torch::empty({n}, scales.options());
#ifdef TRELLIS_WITH_KERNELS
  if (codes.is_cuda()) {
    kernels::DequantizeFp8Blockwise(codes.data_ptr<uint8_t>(), scales.data_ptr<float>(), n,
                                    out.data_ptr<float>(),
                                    c10::cuda::getCurrentCUDAStream().stream());
    return out;
  }
#endif
  auto q = codes.cpu().contiguous(), s = scales.cpu().contiguous();
  auto host = torch::empty({n}, torch::kFloat);
  ref::DequantizeFp8BlockwiseRef(q.data_ptr<uint8_t>(), s.data_ptr<float>(), n,
                                 host.data_ptr<float>());
  return out.copy_(host);
}

PendingTensor StartGatherExperts(Comm& comm, const torch::Tensor& shard, ExpertGather how) {
  auto flat = Contiguous32(shard);
  const int64_t n = flat.numel(), world = comm.size();
  std::vector<std::unique_ptr<CommWork>> works;
  switch (how) {
    case ExpertGather::kFp32: {
      auto full = torch::empty({n * world}, flat.options());
      works.push_back(comm.StartAllGather(flat, full));
      return PendingTensor(std::move(works), [full] { return full; });
    }
    case ExpertGather::kBf16: {
      auto mine = flat.to(torch::kBFloat16);
      auto full = torch::empty({n * world}, mine.options());
      works.push_back(comm.StartAllGather(mine, full));
      return PendingTensor(std::move(works), [full] { return full.to(torch::kFloat); });
    }
    case ExpertGather::kFp8: {
      // Shards are equal in size, so every rank's blocks line up: codes and
      // scales gather as two flat buffers and dequantize in one pass.
      torch::Tensor codes, scales;
      QuantizeFp8(flat, &codes, &scales);
      auto all_codes = torch::empty({n * world}, codes.options());
      auto all_scales = torch::empty({scales.numel() * world}, scales.options());
      works.push_back(comm.StartAllGather(codes, all_codes));
      works.push_back(comm.StartAllGather(scales, all_scales));
      const int64_t nb = scales.numel();
      return PendingTensor(std::move(works), [all_codes, all_scales, n, nb, world] {
        if (n % ref::kFp8BlockSize == 0) return DequantizeFp8(all_codes, all_scales);
        // A partial last block per shard: dequantize shard by shard.
        std::vector<torch::Tensor> parts;
        for (int64_t r = 0; r < world; ++r)
          parts.push_back(DequantizeFp8(all_codes.narrow(0, r * n, n).clone(),
                                        all_scales.narrow(0, r * nb, nb).clone()));
        return torch::cat(parts);
      });
    }
  }
  throw TrainError("expert gather: unknown mode");
}

torch::Tensor GatherExperts(Comm& comm, const torch::Tensor& shard, ExpertGather how) {
  return StartGatherExperts(comm, shard, how).Finish();
}

}  // namespace trellis::train
