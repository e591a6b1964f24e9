#include "kernels/sm_occupier.h"

#include <chrono>

#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

TEST(SmOccupier, HoldsTheSmsForTheRequestedTime) {
  TRELLIS_SKIP_WITHOUT_GPU();
  cudaStream_t stream;
  TRELLIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SmOccupier occupier;
  const auto start = std::chrono::steady_clock::now();
  occupier.Hold(40, std::chrono::milliseconds(30), stream);  // returns once all 40 run
  TRELLIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double held_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(held_ms, 29.0);
  EXPECT_LT(held_ms, 1000.0);
  TRELLIS_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(SmOccupier, LeavesTheOtherSmsFree) {
  TRELLIS_SKIP_WITHOUT_GPU();
  int sms = 0;
  TRELLIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t a, b;
  TRELLIS_CUDA_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  TRELLIS_CUDA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  SmOccupier first, second;
  first.Hold(sms / 2, std::chrono::milliseconds(50), a);
  // The remaining SMs can still be taken while the first hold lasts.
  EXPECT_NO_THROW(second.Hold(sms - sms / 2, std::chrono::milliseconds(1), b));
  TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
  TRELLIS_CUDA_CHECK(cudaStreamDestroy(a));
  TRELLIS_CUDA_CHECK(cudaStreamDestroy(b));
}

TEST(SmOccupier, RejectsMoreSmsThanTheDeviceHas) {
  TRELLIS_SKIP_WITHOUT_GPU();
  SmOccupier occupier;
  EXPECT_THROW(occupier.Hold(100000, std::chrono::milliseconds(1), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace trellis::kernels
