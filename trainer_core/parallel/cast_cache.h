#pragma once
// A master tensor's copy in the compute dtype (bf16 weights for fp32 master
// weights), made again only when the master has changed: the optimizer's
// in-place update and a checkpoint load both bump the tensor's version
// counter, which the copy remembers. Forward then reads the copy instead of
// casting 4 bytes to 2 per weight in every forward (every micro-batch) and
// up-casting every weight gradient in backward.

#include <torch/torch.h>

namespace trellis::train {

class CastCache {
 public:
  // The copy of `master` in `dtype`, refreshed if `master` (the same tensor,
  // or another) has been written since the last call.
  const torch::Tensor& Get(const torch::Tensor& master, torch::Dtype dtype) {
    const auto* impl = master.unsafeGetTensorImpl();
    const int64_t version = static_cast<int64_t>(master._version());
    if (copy_.defined() && impl == master_ && version == version_ && copy_.scalar_type() == dtype &&
        copy_.sizes() == master.sizes())
      return copy_;
    torch::NoGradGuard no_grad;
    if (copy_.defined() && copy_.scalar_type() == dtype && copy_.sizes() == master.sizes() &&
        copy_.device() == master.device())
      copy_.copy_(master);  // the same buffer, step after step
    else
      copy_ = master.detach().to(dtype, /*non_blocking=*/false, /*copy=*/true);
    master_ = impl;
    version_ = version;
    return copy_;
  }

  // The copy's buffer (allocated on first use) for a writer that fills it
  // with the master's new values in the pass that writes the master (the
  // fused optimizer step); MarkCurrent(master) then records that they match.
  torch::Tensor Buffer(const torch::Tensor& master, torch::Dtype dtype) {
    if (!copy_.defined() || copy_.scalar_type() != dtype || copy_.sizes() != master.sizes() ||
        copy_.device() != master.device()) {
      copy_ = torch::empty(master.sizes(), master.options().dtype(dtype));
      master_ = nullptr;
    }
    return copy_;
  }
  void MarkCurrent(const torch::Tensor& master) {
    master_ = master.unsafeGetTensorImpl();
    version_ = static_cast<int64_t>(master._version());
  }

 private:
  torch::Tensor copy_;
  const void* master_ = nullptr;
  int64_t version_ = -1;
};

}  // namespace trellis::train
