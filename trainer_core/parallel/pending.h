#pragma once
// A tensor on its way through collectives started ahead of its use (a
// prefetched gather, a gradient reduction in flight): Finish() waits for them
// in the order they were started and returns the tensor, finished by `then`
// (a conversion, a sum over ranks). It runs where it is called: on the CPU
// now, on a GPU queued on the current stream after the waits.

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "trainer_core/parallel/comm.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

class PendingTensor {
 public:
  PendingTensor() = default;
  // Ready now; nothing travels.
  explicit PendingTensor(torch::Tensor ready) : then_([t = std::move(ready)] { return t; }) {}
  PendingTensor(std::vector<std::unique_ptr<CommWork>> works, std::function<torch::Tensor()> then)
      : works_(std::move(works)), then_(std::move(then)) {}

  bool valid() const { return static_cast<bool>(then_); }
  // Once.
  torch::Tensor Finish() {
    TORCH_CHECK(valid(), "PendingTensor: finished twice or never started");
    for (auto& w : works_) w->Wait();
    works_.clear();
    auto then = std::move(then_);
    then_ = nullptr;
    return then();
  }

 private:
  std::vector<std::unique_ptr<CommWork>> works_;
  std::function<torch::Tensor()> then_;
};

// ReduceScatter (comm.h), started: Finish() returns this rank's fp32 sum.
PendingTensor StartReduceScatter(Comm& comm, const at::Tensor& full, Wire wire);

}  // namespace trellis::train
