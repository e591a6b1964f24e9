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

// Rows of a strided bf16 matrix into a dense fp32 one; recv's gaps hold NaN
// (never read), acc has poison past its end (never written).
struct RowsCase {
  int64_t rows, row_len, recv_stride;
};

class AccumulateRowsTest : public ::testing::TestWithParam<RowsCase> {};

TEST_P(AccumulateRowsTest, AddsOrWritesEachRowLikeTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [rows, row_len, recv_stride] = GetParam();
  const int64_t n = rows * row_len;
  testing::Bf16Data recv = testing::RandomBf16(rng, (rows - 1) * recv_stride + row_len);
  for (int64_t r = 0; r + 1 < rows; ++r)
    for (int64_t j = row_len; j < recv_stride; ++j) recv.bits[r * recv_stride + j] = 0x7fc1;
  std::vector<float> acc(n + 8);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (float& v : acc) v = dist(rng);
  for (bool overwrite : {false, true}) {
    std::vector<float> want = acc;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < row_len; ++j) {
        const float v = recv.values[r * recv_stride + j];
        want[r * row_len + j] = overwrite ? v : want[r * row_len + j] + v;
      }
    DeviceBuffer<float> d_acc(acc);
    DeviceBuffer<Bf16Bits> d_recv(recv.bits);
    AccumulateBf16Rows(d_acc.get(), AsBf16(d_recv), rows, row_len, recv_stride, overwrite,
                       nullptr);
    testing::Sync();
    const std::vector<float> got = d_acc.Download();
    int64_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += std::memcmp(&got[i], &want[i], 4) != 0;
    EXPECT_EQ(mismatches, 0) << "overwrite " << overwrite;
  }
}

// 64 rows of 768 x 64 at twice that apart (moe-bench's experts have 768 x
// 2048) make the grid stride; a width that is not a multiple of 8 and an odd stride take
// the scalar path; one row is dense whatever its stride.
INSTANTIATE_TEST_SUITE_P(Sizes, AccumulateRowsTest,
                         ::testing::Values(RowsCase{1, 8, 8}, RowsCase{5, 16, 40},
                                           RowsCase{3, 12, 24}, RowsCase{4, 16, 20},
                                           RowsCase{1, 1003, 1},
                                           RowsCase{64, 768 * 64, 2 * 768 * 64}));

TEST(AccumulateRows, RejectsBadShapes) {
  EXPECT_THROW(AccumulateBf16Rows(nullptr, nullptr, -1, 8, 8, false, nullptr),
               std::invalid_argument);
  EXPECT_THROW(AccumulateBf16Rows(nullptr, nullptr, 2, 8, 4, false, nullptr),
               std::invalid_argument);
  EXPECT_THROW(AccumulateBf16Rows(nullptr, nullptr, 2, 8, 8, false, nullptr),
               std::invalid_argument);  // work to do, no buffers
  EXPECT_NO_THROW(AccumulateBf16Rows(nullptr, nullptr, 0, 8, 8, false, nullptr));
}

TEST(Accumulate, RejectsBadStrides) {
  TRELLIS_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> acc(64);
  DeviceBuffer<Bf16Bits> recv(256);
  EXPECT_THROW(AccumulateBf16(acc.get(), AsBf16(recv), 2, 64, 60, nullptr), std::invalid_argument);
  EXPECT_THROW(AccumulateBf16(acc.get(), AsBf16(recv), 2, 64, 36, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace trellis::kernels
