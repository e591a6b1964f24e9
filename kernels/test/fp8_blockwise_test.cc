#include "kernels/fp8_blockwise.h"

#include <cstring>

#include "kernels/ref/fp8_e4m3.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

// Values whose magnitude changes from block to block (2^-12 .. 2^12), one
// block of zeros, the rest normal.
std::vector<float> BlockScaledValues(std::mt19937_64& rng, int64_t n) {
  std::normal_distribution<float> dist;
  std::uniform_int_distribution<int> exp(-12, 12);
  std::vector<float> x(n);
  for (int64_t b = 0; b < ref::Fp8NumBlocks(n); ++b) {
    const float scale = b == 1 ? 0.0f : std::ldexp(1.0f, exp(rng));
    for (int64_t i = b * 128; i < std::min(n, b * 128 + 128); ++i) x[i] = dist(rng) * scale;
  }
  return x;
}

int64_t CountMismatches(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
  return bad;
}

int64_t CountMismatches(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return bad;
}

class Fp8BlockwiseTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(Fp8BlockwiseTest, MatchesTheReferenceBitForBit) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const int64_t n = GetParam(), blocks = ref::Fp8NumBlocks(n);
  const std::vector<float> x = BlockScaledValues(rng, n);
  std::vector<Bf16Bits> x_bf16(n);
  std::vector<float> x_bf16_values(n);
  for (int64_t i = 0; i < n; ++i) {
    x_bf16[i] = ref::FloatToBf16(x[i]);
    x_bf16_values[i] = ref::Bf16ToFloat(x_bf16[i]);
  }

  DeviceBuffer<float> d_x(x), d_scales(blocks), d_back(n);
  DeviceBuffer<Bf16Bits> d_xb(x_bf16), d_back_bf16(n);
  DeviceBuffer<uint8_t> d_q(n);

  for (bool from_bf16 : {false, true}) {
    SCOPED_TRACE(from_bf16 ? "bf16 input" : "fp32 input");
    const std::vector<float>& values = from_bf16 ? x_bf16_values : x;
    std::vector<uint8_t> q_ref(n);
    std::vector<float> scales_ref(blocks), back_ref(n);
    ref::QuantizeFp8BlockwiseRef(values.data(), n, q_ref.data(), scales_ref.data());
    ref::DequantizeFp8BlockwiseRef(q_ref.data(), scales_ref.data(), n, back_ref.data());

    d_q.Poison();
    d_scales.Poison();
    if (from_bf16) {
      QuantizeFp8Blockwise(AsBf16(d_xb), n, d_q.get(), d_scales.get(), nullptr);
    } else {
      QuantizeFp8Blockwise(d_x.get(), n, d_q.get(), d_scales.get(), nullptr);
    }
    testing::Sync();
    EXPECT_EQ(CountMismatches(d_q.Download(), q_ref), 0);
    EXPECT_EQ(CountMismatches(d_scales.Download(), scales_ref), 0);

    d_back.Poison();
    DequantizeFp8Blockwise(d_q.get(), d_scales.get(), n, d_back.get(), nullptr);
    testing::Sync();
    EXPECT_EQ(CountMismatches(d_back.Download(), back_ref), 0);

    d_back_bf16.Poison();
    DequantizeFp8Blockwise(d_q.get(), d_scales.get(), n, AsBf16(d_back_bf16), nullptr);
    testing::Sync();
    std::vector<float> back_bf16_ref(n);
    for (int64_t i = 0; i < n; ++i) back_bf16_ref[i] = ref::RoundToBf16(back_ref[i]);
    EXPECT_EQ(CountMismatches(testing::Bf16ToFloats(d_back_bf16.Download()), back_bf16_ref), 0);

    // The format's promise: error within 1/16 of the block max (3 mantissa bits).
    EXPECT_LT(testing::RelError(back_ref, values), 0.07);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, Fp8BlockwiseTest,
                         ::testing::Values(1, 7, 127, 128, 129, 5 * 128 + 8, 1000,
                                           (1 << 20) + 40, 3 << 20));

// q only 8-byte aligned (the contract's minimum): the bf16 path's codes then go
// out in 8-byte stores.
TEST(Fp8Blockwise, Bf16QuantizeWithEightByteAlignedCodes) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const int64_t n = 64 * 128 + 24, blocks = ref::Fp8NumBlocks(n);
  const std::vector<float> x = BlockScaledValues(rng, n);
  std::vector<Bf16Bits> x_bf16(n);
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) {
    x_bf16[i] = ref::FloatToBf16(x[i]);
    values[i] = ref::Bf16ToFloat(x_bf16[i]);
  }
  std::vector<uint8_t> q_ref(n);
  std::vector<float> scales_ref(blocks);
  ref::QuantizeFp8BlockwiseRef(values.data(), n, q_ref.data(), scales_ref.data());
  DeviceBuffer<Bf16Bits> d_x(x_bf16);
  DeviceBuffer<uint8_t> d_q(n + 8);
  DeviceBuffer<float> d_scales(blocks);
  d_q.Poison();
  d_scales.Poison();
  QuantizeFp8Blockwise(AsBf16(d_x), n, d_q.get() + 8, d_scales.get(), nullptr);
  testing::Sync();
  const std::vector<uint8_t> q = d_q.Download();
  EXPECT_EQ(CountMismatches(std::vector<uint8_t>(q.begin() + 8, q.end()), q_ref), 0);
  EXPECT_EQ(CountMismatches(d_scales.Download(), scales_ref), 0);
}

TEST(Fp8Blockwise, RejectsMisalignedPointers) {
  TRELLIS_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> x(256), scales(2);
  DeviceBuffer<uint8_t> q(256);
  EXPECT_THROW(QuantizeFp8Blockwise(x.get() + 1, 128, q.get(), scales.get(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(QuantizeFp8Blockwise(x.get(), 128, q.get() + 1, scales.get(), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace trellis::kernels
