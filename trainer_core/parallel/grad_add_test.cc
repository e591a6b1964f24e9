// AddGradInto: the same single fp32 add per element as ATen's into += grad,
// bit for bit, on the CPU (ATen) and on a GPU (kernels/accumulate where built).
#include "trainer_core/parallel/grad_add.h"

#include <gtest/gtest.h>

#include <vector>

namespace trellis::train {
namespace {

TEST(AddGradIntoTest, AddsABf16GradientIntoFp32BitForBit) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA);
  for (const auto& device : devices) {
    // 1,000,003 elements: a tail after the 8-wide accesses; offset 1: unaligned.
    for (int64_t offset : {0, 1}) {
      for (bool kernel : {true, false}) {
        SCOPED_TRACE(device.str() + " offset " + std::to_string(offset) + " kernel " +
                     std::to_string(kernel));
        auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
        auto base = torch::randn({1000003 + offset}, f32.dtype(torch::kBFloat16));
        auto grad = base.narrow(0, offset, 1000003);
        auto into = torch::randn({1000003}, f32);
        auto want = into + grad.to(torch::kFloat);
        AddGradInto(into, grad, kernel);
        EXPECT_TRUE(torch::equal(into, want));
      }
    }
  }
}

TEST(AddGradIntoTest, ShapesMayDifferWithTheSameCount) {
  auto into = torch::zeros({6});
  AddGradInto(into, torch::ones({2, 3}, torch::kBFloat16));
  EXPECT_TRUE(torch::equal(into, torch::ones({6})));
  auto wrong = torch::zeros({5});
  EXPECT_THROW(AddGradInto(wrong, torch::ones({2, 3})), c10::Error);
  auto half = torch::zeros({6}, torch::kDouble);
  EXPECT_THROW(AddGradInto(half, torch::ones({6})), c10::Error);
}

}  // namespace
}  // namespace trellis::train
