// Helpers for the GPU tests: skip without a device, a seed printed once (fix it
// with TRELLIS_TEST_SEED), device buffers that are poisoned before each launch
// (0xff bytes: NaN in fp32, bf16 and E4M3, -1 in int32) and norm errors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/ref/bf16.h"

namespace trellis::kernels::testing {

inline bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define TRELLIS_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                              \
    if (!::trellis::kernels::testing::HaveGpu()) {                                  \
      GTEST_SKIP() << "no CUDA device here: GPU kernel tests run on a GPU machine"; \
    }                                                                               \
  } while (0)

inline uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("TRELLIS_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("kernels_test seed: %llu (set TRELLIS_TEST_SEED to repeat)\n",
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// A fresh generator per test, derived from the run's seed and the test's name.
inline std::mt19937_64 TestRng() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  return std::mt19937_64(TestSeed() ^ std::hash<std::string>{}(name));
}

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    TRELLIS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(count, 1) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  void Upload(const std::vector<T>& host) {
    TRELLIS_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  void Poison() { TRELLIS_CUDA_CHECK(cudaMemset(ptr_, 0xff, count_ * sizeof(T))); }
  std::vector<T> Download() const {
    std::vector<T> host(count_);
    TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
    TRELLIS_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

// bf16 data as raw bits on the host; the device sees __nv_bfloat16.
using Bf16Bits = uint16_t;
inline const __nv_bfloat16* AsBf16(const DeviceBuffer<Bf16Bits>& b) {
  return reinterpret_cast<const __nv_bfloat16*>(b.get());
}
inline __nv_bfloat16* AsBf16(DeviceBuffer<Bf16Bits>& b) {
  return reinterpret_cast<__nv_bfloat16*>(b.get());
}

// DeviceBuffer::Poison's bytes as bf16, and how many poisoned elements a test
// leaves after an output to catch writes past its end.
inline constexpr Bf16Bits kPoisonBf16 = 0xffff;
inline constexpr int64_t kPoisonSlack = 8;

// `call` throws std::invalid_argument whose message names `what` (the
// kernels' argument checks, which run before any CUDA call).
inline void ExpectInvalid(const std::function<void()>& call, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << "no throw; expected one naming " << what;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// got holds an output of n elements at [off, off + n): poison must be intact
// around it.
inline void ExpectPoisonAround(const std::vector<Bf16Bits>& got, int64_t off, size_t n,
                               const char* what) {
  for (int64_t i = 0; i < off; ++i) ASSERT_EQ(got[i], kPoisonBf16) << what << ": wrote before";
  for (size_t i = off + n; i < got.size(); ++i)
    ASSERT_EQ(got[i], kPoisonBf16) << what << ": wrote after";
}

// Normal(0, stddev) values already rounded to bf16: `values` feed the CPU
// reference, `bits` the device.
struct Bf16Data {
  std::vector<float> values;
  std::vector<Bf16Bits> bits;
};
inline Bf16Data RandomBf16(std::mt19937_64& rng, size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  Bf16Data d{std::vector<float>(n), std::vector<Bf16Bits>(n)};
  for (size_t i = 0; i < n; ++i) {
    d.bits[i] = ref::FloatToBf16(dist(rng));
    d.values[i] = ref::Bf16ToFloat(d.bits[i]);
  }
  return d;
}

inline std::vector<float> Bf16ToFloats(const std::vector<Bf16Bits>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = ref::Bf16ToFloat(bits[i]);
  return out;
}

// Counts NaNs (poison left behind means an element was never written).
inline size_t CountNaN(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += std::isnan(x);
  return n;
}

// ||got - ref|| / ||ref||, in double; NaN anywhere gives NaN (never passes).
inline double RelError(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    diff += d * d;
    norm += double(ref[i]) * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

inline void Sync() {
  TRELLIS_CUDA_CHECK(cudaGetLastError());
  TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace trellis::kernels::testing
