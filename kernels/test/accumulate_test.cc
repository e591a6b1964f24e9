#include "kernels/accumulate.h"

#include <cstring>

#include "kernels/ref/moe_layout.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

struct Case {
  int64_t n;
  int bufs;
};

class AccumulateTest : public ::testing::TestWithParam<Case> {};

TEST_P(AccumulateTest, SumsInOrderLikeTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [n, bufs] = GetParam();
  const int64_t stride = (n + 7) / 8 * 8 + 8;  // padded rows, as a receive buffer may have
  testing::Bf16Data recv = testing::RandomBf16(rng, bufs * stride);
  std::vector<float> acc(n), recv_packed(bufs * n);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (float& v : acc) v = dist(rng);
  for (int b = 0; b < bufs; ++b) {
    for (int64_t i = 0; i < n; ++i) recv_packed[b * n + i] = recv.values[b * stride + i];
  }
  std::vector<float> want = acc;
  ref::AccumulateRef(want.data(), recv_packed.data(), bufs, n);

  DeviceBuffer<float> d_acc(acc);
  DeviceBuffer<Bf16Bits> d_recv(recv.bits);
  AccumulateBf16(d_acc.get(), AsBf16(d_recv), bufs, n, stride, nullptr);
  testing::Sync();
  const std::vector<float> got = d_acc.Download();
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) mismatches += std::memcmp(&got[i], &want[i], 4) != 0;
  EXPECT_EQ(mismatches, 0) << "rel error " << testing::RelError(got, want);
}

INSTANTIATE_TEST_SUITE_P(Sizes, AccumulateTest,
                         ::testing::Values(Case{1, 1}, Case{7, 3}, Case{8, 2}, Case{1000, 8},
                                           Case{(1 << 20) + 3, 4}, Case{4099, 17}));

TEST(Accumulate, RejectsBadStrides) {
  TRELLIS_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> acc(64);
  DeviceBuffer<Bf16Bits> recv(256);
  EXPECT_THROW(AccumulateBf16(acc.get(), AsBf16(recv), 2, 64, 60, nullptr), std::invalid_argument);
  EXPECT_THROW(AccumulateBf16(acc.get(), AsBf16(recv), 2, 64, 36, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace trellis::kernels
