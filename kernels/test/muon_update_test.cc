#include "kernels/muon_update.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ref/optim_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectInvalid;

std::vector<float> Normal(std::mt19937_64& rng, int64_t n, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Sizes with and without a tail of 1..3, and an offset of one element that
// makes every pointer unaligned (the scalar path).
struct Case {
  int64_t n;
  int64_t offset;
};

class MuonUpdateTest : public ::testing::TestWithParam<Case> {};

TEST_P(MuonUpdateTest, MomentumMatchesTheReferenceBitForBit) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [n, off] = GetParam();
  const float momentum = 0.95f;
  auto grad = Normal(rng, n + off, 1e-3f), mom = Normal(rng, n + off, 1e-2f);
  std::vector<float> want_mom(mom.begin() + off, mom.end()), want_update(n);
  ref::MuonMomentumRef(grad.data() + off, want_mom.data(), want_update.data(), n, momentum);

  DeviceBuffer<float> d_grad(grad), d_mom(mom), d_update(n + off);
  DeviceBuffer<testing::Bf16Bits> d_update16(n + off);
  d_update.Poison();
  d_update16.Poison();
  MuonMomentum(d_grad.get() + off, d_mom.get() + off, d_update.get() + off, n, momentum, nullptr,
               nullptr);
  testing::Sync();
  auto got_mom = d_mom.Download(), got_update = d_update.Download();
  EXPECT_EQ(std::vector<float>(got_mom.begin() + off, got_mom.end()), want_mom);
  EXPECT_EQ(std::vector<float>(got_update.begin() + off, got_update.end()), want_update);

  // The bf16 update from the same momentum: the fp32 update rounded once.
  d_mom.Upload(mom);
  MuonMomentum(d_grad.get() + off, d_mom.get() + off, testing::AsBf16(d_update16) + off, n,
               momentum, nullptr, nullptr);
  testing::Sync();
  auto got16 = d_update16.Download();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got16[off + i], ref::FloatToBf16(want_update[i])) << "element " << i;
}

// The clip factor read on the device: the same bits as a scaling pass before
// the momentum (the reference scales first, rounding once).
TEST_P(MuonUpdateTest, MomentumScalesTheGradientByTheDeviceFactor) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [n, off] = GetParam();
  const float momentum = 0.95f, scale = 0.3712f;
  auto grad = Normal(rng, n + off, 1e-3f), mom = Normal(rng, n + off, 1e-2f);
  std::vector<float> want_mom(mom.begin() + off, mom.end()), want_update(n);
  ref::MuonMomentumRef(grad.data() + off, want_mom.data(), want_update.data(), n, momentum,
                       scale);
  std::vector<float> scaled(grad.begin() + off, grad.end());
  for (float& g : scaled) g *= scale;
  std::vector<float> scaled_mom(mom.begin() + off, mom.end()), scaled_update(n);
  ref::MuonMomentumRef(scaled.data(), scaled_mom.data(), scaled_update.data(), n, momentum);
  ASSERT_EQ(scaled_update, want_update) << "the reference's scale is one rounding";

  DeviceBuffer<float> d_grad(grad), d_mom(mom), d_update(n + off);
  DeviceBuffer<float> d_scale(std::vector<float>{scale});
  DeviceBuffer<testing::Bf16Bits> d_update16(n + off);
  d_update.Poison();
  MuonMomentum(d_grad.get() + off, d_mom.get() + off, d_update.get() + off, n, momentum,
               d_scale.get(), nullptr);
  testing::Sync();
  auto got_mom = d_mom.Download(), got_update = d_update.Download();
  EXPECT_EQ(std::vector<float>(got_mom.begin() + off, got_mom.end()), want_mom);
  EXPECT_EQ(std::vector<float>(got_update.begin() + off, got_update.end()), want_update);
  EXPECT_EQ(d_grad.Download(), grad) << "the gradient itself is left unscaled";

  d_mom.Upload(mom);
  d_update16.Poison();
  MuonMomentum(d_grad.get() + off, d_mom.get() + off, testing::AsBf16(d_update16) + off, n,
               momentum, d_scale.get(), nullptr);
  testing::Sync();
  auto got16 = d_update16.Download();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got16[off + i], ref::FloatToBf16(want_update[i])) << "element " << i;
}

TEST_P(MuonUpdateTest, ApplyMatchesTheReferenceAndWritesTheBf16Copy) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [n, off] = GetParam();
  const float decay = 1.0f - 0.02f * 0.1f, step = -0.02f * 1.6f;
  auto value = Normal(rng, n + off, 2e-2f), ortho = Normal(rng, n + off, 1.0f);
  std::vector<float> want(value.begin() + off, value.end());
  ref::ApplyUpdateRef(want.data(), ortho.data() + off, n, decay, step);

  for (bool with_copy : {false, true}) {
    DeviceBuffer<float> d_value(value), d_ortho(ortho);
    DeviceBuffer<testing::Bf16Bits> d_copy(n + off);
    d_copy.Poison();
    ApplyUpdate(d_value.get() + off, d_ortho.get() + off, n, decay, step,
                with_copy ? testing::AsBf16(d_copy) + off : nullptr, nullptr);
    testing::Sync();
    auto got = d_value.Download();
    EXPECT_EQ(std::vector<float>(got.begin() + off, got.end()), want) << "copy " << with_copy;
    if (!with_copy) continue;
    auto copy = d_copy.Download();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(copy[off + i], ref::FloatToBf16(want[i])) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, MuonUpdateTest,
                         ::testing::Values(Case{1, 0}, Case{7, 0}, Case{4096, 0},
                                           Case{100003, 0}, Case{4099, 1}, Case{1 << 20, 0}));

// The bf16 copy row-strided: rows of copy_row every copy_stride elements, poison
// in the gaps (and kPoisonSlack after the last row) that must stay. copy_row 6
// and copy_row 8 with stride 10 take the scalar path; copy_row == copy_stride
// (6 of 66) the contiguous one with a tail.
struct StridedCase {
  int64_t copy_row;
  int64_t copy_stride;
  int64_t n;
};

class ApplyStridedCopyTest : public ::testing::TestWithParam<StridedCase> {};

TEST_P(ApplyStridedCopyTest, MatchesTheReferenceAndLeavesTheGaps) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [copy_row, copy_stride, n] = GetParam();
  const float decay = 1.0f - 0.02f * 0.1f, step = -0.02f * 1.6f;
  auto value = Normal(rng, n, 2e-2f), ortho = Normal(rng, n, 1.0f);
  std::vector<float> want(value);
  ref::ApplyUpdateRef(want.data(), ortho.data(), n, decay, step);

  const int64_t rows = n / copy_row;
  DeviceBuffer<float> d_value(value), d_ortho(ortho);
  DeviceBuffer<testing::Bf16Bits> d_copy(rows * copy_stride + testing::kPoisonSlack);
  d_copy.Poison();
  ApplyUpdate(d_value.get(), d_ortho.get(), n, decay, step, testing::AsBf16(d_copy), copy_row,
              copy_stride, nullptr);
  testing::Sync();
  EXPECT_EQ(d_value.Download(), want);
  const auto copy = d_copy.Download();
  for (int64_t k = 0; k < static_cast<int64_t>(copy.size()); ++k) {
    const int64_t r = k / copy_stride, c = k % copy_stride;
    if (r >= rows || c >= copy_row) {
      ASSERT_EQ(copy[k], testing::kPoisonBf16) << "wrote into the gap at row " << r << " col " << c;
    } else {
      ASSERT_EQ(copy[k], ref::FloatToBf16(want[r * copy_row + c])) << "row " << r << " col " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, ApplyStridedCopyTest,
                         ::testing::Values(StridedCase{8, 16, 64},
                                           StridedCase{1024, 2048, 1024 * 37},
                                           StridedCase{6, 10, 60}, StridedCase{8, 10, 80},
                                           StridedCase{6, 6, 66}));

// ApplyUpdateBf16: ortho in bf16, in value's layout or transposed per matrix,
// against the fp32 reference on ortho's exact fp32 values. Shapes off the 32 x
// 32 tiles and of odd sizes (the scalar path); copies dense, strided with a
// gap after each matrix (as an expert's gate rows sit before its up rows), or
// none.
struct Bf16Case {
  int64_t batch, rows, cols;
  bool transposed;
  int64_t copy_gap;  // -1: no copy; 0: dense; > 0: elements left between matrices
};

class ApplyBf16Test : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(ApplyBf16Test, MatchesTheReferenceOnTheExactValues) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [batch, rows, cols, transposed, gap] = GetParam();
  const int64_t elems = rows * cols, n = batch * elems;
  const float decay = 1.0f - 0.02f * 0.1f, step = -0.02f * 1.6f;
  auto value = Normal(rng, n, 2e-2f);
  const testing::Bf16Data ortho = testing::RandomBf16(rng, n);
  // ortho's values in value's layout: element (r, c) of a matrix sits at c * rows + r when
  // transposed.
  std::vector<float> ortho_in_place(n);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        ortho_in_place[b * elems + r * cols + c] =
            ortho.values[b * elems + (transposed ? c * rows + r : r * cols + c)];
  std::vector<float> want(value);
  ref::ApplyUpdateRef(want.data(), ortho_in_place.data(), n, decay, step);

  const int64_t copy_stride = elems + std::max<int64_t>(gap, 0);
  DeviceBuffer<float> d_value(value);
  DeviceBuffer<testing::Bf16Bits> d_ortho(ortho.bits);
  DeviceBuffer<testing::Bf16Bits> d_copy(batch * copy_stride + testing::kPoisonSlack);
  d_copy.Poison();
  ApplyUpdateBf16(d_value.get(), testing::AsBf16(d_ortho), batch, rows, cols, transposed, decay,
                  step, gap < 0 ? nullptr : testing::AsBf16(d_copy), elems, copy_stride, nullptr);
  testing::Sync();
  EXPECT_EQ(d_value.Download(), want);
  const auto copy = d_copy.Download();
  for (int64_t k = 0; k < static_cast<int64_t>(copy.size()); ++k) {
    const int64_t b = k / copy_stride, i = k % copy_stride;
    if (gap < 0 || b >= batch || i >= elems) {
      ASSERT_EQ(copy[k], testing::kPoisonBf16) << "wrote outside matrix " << b << " at " << i;
    } else {
      ASSERT_EQ(copy[k], ref::FloatToBf16(want[b * elems + i])) << "matrix " << b << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, ApplyBf16Test,
                         ::testing::Values(Bf16Case{3, 64, 96, false, 0},
                                           Bf16Case{3, 64, 96, false, 6144},
                                           Bf16Case{2, 96, 64, true, 0},
                                           Bf16Case{2, 96, 64, true, 4},
                                           Bf16Case{2, 50, 37, true, -1},
                                           Bf16Case{1, 37, 50, false, -1},
                                           Bf16Case{4, 33, 65, true, 0},
                                           Bf16Case{2, 7, 9, false, 3}));

// Checked before any CUDA call: runs without a device too. The pointers point
// into host buffers, never read.
TEST(ApplyUpdateArgs, RejectsBadCopyLayoutsAndAcceptsNothingToDo) {
  std::vector<float> value(64), ortho(64);
  std::vector<testing::Bf16Bits> copy(128);
  auto* c = reinterpret_cast<__nv_bfloat16*>(copy.data());
  auto apply = [&](int64_t n, __nv_bfloat16* cp, int64_t copy_row, int64_t copy_stride) {
    return [=, &value, &ortho] {
      ApplyUpdate(value.data(), ortho.data(), n, 1.0f, -0.01f, cp, copy_row, copy_stride,
                  nullptr);
    };
  };
  ExpectInvalid(apply(64, c, 0, 16), "ApplyUpdate: copy_row must be > 0");
  ExpectInvalid(apply(64, c, -8, 16), "ApplyUpdate: copy_row must be > 0");
  ExpectInvalid(apply(64, c, 8, 7), "ApplyUpdate: copy_stride must be >= copy_row");
  ExpectInvalid(apply(60, c, 8, 16), "ApplyUpdate: n must be a multiple of copy_row");
  ExpectInvalid(apply(-1, c, 8, 16), "ApplyUpdate: n >= 0");
  ExpectInvalid([] { ApplyUpdate(nullptr, nullptr, 8, 1.0f, 0.0f, nullptr, 8, 8, nullptr); },
                "ApplyUpdate: n >= 0 and buffers");
  EXPECT_THROW(ApplyUpdate(value.data(), ortho.data(), -1, 1.0f, 0.0f, c, nullptr),
               std::invalid_argument);
  EXPECT_NO_THROW(ApplyUpdate(nullptr, nullptr, 0, 1.0f, 0.0f, nullptr, 0, 0, nullptr));
  EXPECT_NO_THROW(ApplyUpdate(nullptr, nullptr, 0, 1.0f, 0.0f, nullptr, nullptr));
  const auto* o16 = reinterpret_cast<const __nv_bfloat16*>(copy.data());
  ExpectInvalid(
      [&] { ApplyUpdateBf16(value.data(), o16, 2, -1, 8, true, 1, 0, c, 8, 8, nullptr); },
      "ApplyUpdateBf16: batch, rows and cols must be >= 0");
  ExpectInvalid(
      [&] { ApplyUpdateBf16(value.data(), o16, 2, 4, 8, false, 1, 0, c, 12, 16, nullptr); },
      "ApplyUpdate: n must be a multiple of copy_row");
  EXPECT_NO_THROW(ApplyUpdateBf16(nullptr, nullptr, 0, 4, 8, true, 1, 0, nullptr, 0, 0, nullptr));
}

}  // namespace
}  // namespace trellis::kernels
