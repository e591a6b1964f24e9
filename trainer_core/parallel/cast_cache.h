#pragma once
// A master tensor's copy in the compute dtype (bf16 weights for fp32 master
// weights), made again only when the master has changed: the optimizer's
// in-place update and a checkpoint load both bump the tensor's version
// counter, which the copy remembers. Forward then reads the copy instead of
// casting 4 bytes to 2 per weight in every forward (every micro-batch) and
// up-casting every weight gradient in backward.

#include <functional>

#include "trainer_core/torch_api.h"

namespace trellis::train {

class CastCache {
 public:
  // Fills `copy` (master's size, the copy's dtype) with master's values in a
  // layout of the caller's own, e.g. fsdp's expert compute form.
  using Writer = std::function<void(const torch::Tensor& master, torch::Tensor& copy)>;

  // The copy of `master` in `dtype`, refreshed if `master` (the same tensor,
  // or another) has been written since the last call. Without a writer the
  // copy keeps master's order (layout 0); with one, `layout` names the
  // writer's layout, so that a copy in another layout is never taken for
  // current.
  const torch::Tensor& Get(const torch::Tensor& master, torch::Dtype dtype, int layout = 0,
                           const Writer& write = nullptr) {
    const auto* impl = master.unsafeGetTensorImpl();
    const int64_t version = static_cast<int64_t>(master._version());
    if (copy_.defined() && impl == master_ && version == version_ && layout == layout_ &&
        copy_.scalar_type() == dtype && copy_.sizes() == master.sizes())
      return copy_;
    torch::NoGradGuard no_grad;
    const bool reuse = copy_.defined() && copy_.scalar_type() == dtype &&
                       copy_.sizes() == master.sizes() && copy_.device() == master.device();
    if (!reuse) copy_ = torch::empty(master.sizes(), master.options().dtype(dtype));
    if (write)
      write(master, copy_);
    else
      copy_.copy_(master);  // the same buffer, step after step
    master_ = impl;
    version_ = version;
    layout_ = layout;
    return copy_;
  }

  // The copy's buffer (allocated on first use) for a writer that fills it
  // with the master's new values in the pass that writes the master (the
  // fused optimizer step); MarkCurrent(master, layout) then records that they
  // match, in that layout.
  torch::Tensor Buffer(const torch::Tensor& master, torch::Dtype dtype) {
    if (!copy_.defined() || copy_.scalar_type() != dtype || copy_.sizes() != master.sizes() ||
        copy_.device() != master.device()) {
      copy_ = torch::empty(master.sizes(), master.options().dtype(dtype));
      master_ = nullptr;
    }
    return copy_;
  }
  void MarkCurrent(const torch::Tensor& master, int layout = 0) {
    master_ = master.unsafeGetTensorImpl();
    version_ = static_cast<int64_t>(master._version());
    layout_ = layout;
  }

 private:
  torch::Tensor copy_;
  const void* master_ = nullptr;
  int64_t version_ = -1;
  int layout_ = 0;
};

}  // namespace trellis::train
