// CrossEntropyRows against kernels/ref/cross_entropy_ref.h (fp64) on fresh
// bf16 logits: the loss to fp32 precision (relative to the row's largest
// logit, which the log-sum-exp carries), each gradient element within a
// bf16 rounding of the exact softmax - onehot.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/cross_entropy_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;
using testing::ExpectInvalid;

struct Case {
  int64_t rows, vocab, ld;
  int64_t offset;  // elements before the logits: odd offsets take the one-by-one path
  bool in_place;
  float stddev;
};

class CrossEntropyRowsTest : public ::testing::TestWithParam<Case> {};

// Targets drawn over the vocabulary, every 5th row ignored (-1).
std::vector<int64_t> Targets(std::mt19937_64& rng, int64_t rows, int64_t vocab) {
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = r % 5 == 4 ? -1 : pick(rng);
  return t;
}

TEST_P(CrossEntropyRowsTest, LossAndGradientMatchTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Case c = GetParam();
  const int64_t total = c.offset + c.rows * c.ld + testing::kPoisonSlack;
  testing::Bf16Data data = testing::RandomBf16(rng, total, c.stddev);
  // A few logits far out, where exp over- or underflows without the max.
  for (int64_t i = c.offset; i < total; i += 997) {
    data.bits[i] = ref::FloatToBf16(i % 2 ? 120.0f : -300.0f);
    data.values[i] = ref::Bf16ToFloat(data.bits[i]);
  }
  std::vector<float> dense(c.rows * c.vocab);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.vocab; ++j)
      dense[r * c.vocab + j] = data.values[c.offset + r * c.ld + j];
  const std::vector<int64_t> targets = Targets(rng, c.rows, c.vocab);
  std::vector<double> want_loss(c.rows), want_grad(c.rows * c.vocab);
  ref::CrossEntropyRowsRef(dense.data(), c.rows, c.vocab, targets.data(), want_loss.data(),
                           want_grad.data());

  DeviceBuffer<Bf16Bits> logits(data.bits);
  DeviceBuffer<Bf16Bits> separate(total);
  separate.Poison();
  DeviceBuffer<int64_t> d_targets(targets);
  DeviceBuffer<float> loss(c.rows);
  loss.Poison();
  Bf16Bits* grad_base = c.in_place ? logits.get() : separate.get();
  CrossEntropyRows(AsBf16(logits) + c.offset, c.rows, c.vocab, c.ld, d_targets.get(), loss.get(),
                   reinterpret_cast<__nv_bfloat16*>(grad_base) + c.offset, nullptr);
  testing::Sync();
  const std::vector<float> got_loss = loss.Download();
  const std::vector<Bf16Bits> got = c.in_place ? logits.Download() : separate.Download();

  for (int64_t r = 0; r < c.rows; ++r) {
    float top = 0;
    for (int64_t j = 0; j < c.vocab; ++j) top = std::max(top, std::fabs(dense[r * c.vocab + j]));
    ASSERT_NEAR(got_loss[r], want_loss[r], 1e-5 * (1 + top)) << "row " << r;
    for (int64_t j = 0; j < c.vocab; ++j) {
      const double want = want_grad[r * c.vocab + j];
      const float g = ref::Bf16ToFloat(got[c.offset + r * c.ld + j]);
      ASSERT_NEAR(g, want, std::fabs(want) / 128 + 1e-9) << "row " << r << " element " << j;
    }
    // Between rows (ld > vocab) nothing is written: poison, or the logits in place.
    for (int64_t j = c.vocab; j < c.ld && r + 1 < c.rows; ++j) {
      const Bf16Bits before = c.in_place ? data.bits[c.offset + r * c.ld + j] : 0xffff;
      ASSERT_EQ(got[c.offset + r * c.ld + j], before) << "row " << r << " gap " << j;
    }
  }
  if (!c.in_place) {
    for (int64_t i = 0; i < c.offset; ++i) ASSERT_EQ(got[i], 0xffff) << "wrote before";
    for (int64_t i = c.offset + (c.rows - 1) * c.ld + c.vocab; i < total; ++i)
      ASSERT_EQ(got[i], 0xffff) << "wrote after";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CrossEntropyRowsTest,
    ::testing::Values(Case{1, 8, 8, 0, false, 1.0f},          // one vector per row
                      Case{37, 1000, 1000, 0, true, 2.0f},    // in place, 8 per access
                      Case{64, 32000, 32000, 0, true, 4.0f},  // the vocabulary of moe-bench
                      Case{9, 1003, 1003, 0, false, 1.0f},    // vocab % 8 != 0: one by one
                      Case{6, 512, 520, 0, false, 3.0f},      // rows 520 apart
                      Case{7, 256, 256, 3, true, 1.0f},       // unaligned: one by one
                      Case{3, 2, 2, 0, false, 0.5f}));        // fewer elements than threads

TEST(CrossEntropyRowsEdges, BadTargetsGiveNanLossAndZeroGradient) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const int64_t vocab = 64;
  const std::vector<int64_t> targets = {-1, vocab, -2, 3};
  const testing::Bf16Data data = testing::RandomBf16(rng, targets.size() * vocab);
  DeviceBuffer<Bf16Bits> logits(data.bits);
  DeviceBuffer<int64_t> d_targets(targets);
  DeviceBuffer<float> loss(targets.size());
  CrossEntropyRows(AsBf16(logits), 4, vocab, vocab, d_targets.get(), loss.get(), AsBf16(logits),
                   nullptr);
  const std::vector<float> got_loss = loss.Download();
  const std::vector<float> got = testing::Bf16ToFloats(logits.Download());
  EXPECT_EQ(got_loss[0], 0.0f);
  EXPECT_TRUE(std::isnan(got_loss[1]));
  EXPECT_TRUE(std::isnan(got_loss[2]));
  EXPECT_TRUE(std::isfinite(got_loss[3]) && got_loss[3] > 0);
  for (int64_t j = 0; j < 3 * vocab; ++j) ASSERT_EQ(got[j], 0.0f) << "element " << j;
  double sum = 0;  // a valid row's gradient sums to 0 (softmax sums to 1)
  for (int64_t j = 3 * vocab; j < 4 * vocab; ++j) sum += got[j];
  EXPECT_NEAR(sum, 0.0, 0.02);
}

TEST(CrossEntropyRowsEdges, LossAloneWritesNoGradient) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const testing::Bf16Data data = testing::RandomBf16(rng, 4 * 48);
  DeviceBuffer<Bf16Bits> logits(data.bits);
  DeviceBuffer<int64_t> d_targets(std::vector<int64_t>{0, 47, 5, -1});
  DeviceBuffer<float> loss(4);
  CrossEntropyRows(AsBf16(logits), 4, 48, 48, d_targets.get(), loss.get(), nullptr, nullptr);
  EXPECT_EQ(logits.Download(), data.bits);
  for (float l : loss.Download()) EXPECT_TRUE(std::isfinite(l));
}

TEST(CrossEntropyRowsArgs, BadArgumentsAreRefusedByName) {
  ExpectInvalid([] { CrossEntropyRows(nullptr, -1, 8, 8, nullptr, nullptr, nullptr, nullptr); },
                "rows must be >= 0");
  ExpectInvalid([] { CrossEntropyRows(nullptr, 1, 8, 4, nullptr, nullptr, nullptr, nullptr); },
                "ld >= vocab");
  ExpectInvalid([] { CrossEntropyRows(nullptr, 1, 0, 0, nullptr, nullptr, nullptr, nullptr); },
                "vocab >= 1");
  ExpectInvalid([] { CrossEntropyRows(nullptr, 2, 8, 8, nullptr, nullptr, nullptr, nullptr); },
                "must be non-null");
  CrossEntropyRows(nullptr, 0, 8, 8, nullptr, nullptr, nullptr, nullptr);  // nothing to do
}

}  // namespace
}  // namespace trellis::kernels
