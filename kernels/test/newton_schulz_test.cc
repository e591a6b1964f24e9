#include "kernels/newton_schulz.h"

#include "kernels/muon_update.h"

#include "kernels/ref/dense_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::DeviceBuffer;

struct Shape {
  int batch, m, n;
};

class NewtonSchulzTest : public ::testing::TestWithParam<Shape> {};

TEST_P(NewtonSchulzTest, MatchesTheFp32ReferenceMatrixByMatrix) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [batch, m, n] = GetParam();
  const int64_t elems = int64_t{m} * n;
  std::vector<float> g(batch * elems);
  std::normal_distribution<float> dist;
  // Different scales per matrix: the Frobenius normalization must be per
  // matrix.
  for (int b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < elems; ++i)
      g[b * elems + i] = dist(rng) * (1.0f + 10.0f * b);
  }
  std::vector<float> want(g.size());
  ref::NewtonSchulzRef(g.data(), batch, m, n, 5, want.data());

  DeviceBuffer<float> d_g(g), d_out(g.size());
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fp32 output from the last product"
                       : "conversion pass");
    BatchedNewtonSchulz ns(batch, m, n, fused);
    d_out.Poison();
    ns.Run(d_g.get(), d_out.get(), nullptr);
    testing::Sync();
    const std::vector<float> got = d_out.Download();
    EXPECT_EQ(testing::CountNaN(got), 0u);
    for (int b = 0; b < batch; ++b) {
      const std::vector<float> got_b(got.begin() + b * elems,
                                     got.begin() + (b + 1) * elems);
      const std::vector<float> want_b(want.begin() + b * elems,
                                      want.begin() + (b + 1) * elems);
      const double err = testing::RelError(got_b, want_b);
      // bf16 products over 5 iterations against an fp32 reference (1.2-1.5e-2
      // on an H200).
      EXPECT_LT(err, 5e-2) << "matrix " << b;
      std::printf("  NS [%d, %d, %d] matrix %d: rel error %.2e\n", batch, m, n,
                  b, err);
    }
  }
}

// RunApply against Run (bf16 result, conversion pass) then ApplyUpdate: the
// same bits in value and in its bf16 copy, transposed shapes included.
TEST_P(NewtonSchulzTest, RunApplyIsRunThenApplyBitForBit) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [batch, m, n] = GetParam();
  const int64_t elems = int64_t{m} * n, total = batch * elems;
  std::normal_distribution<float> dist;
  std::vector<float> g(total), value(total);
  for (float& x : g) x = dist(rng);
  for (float& x : value) x = 0.02f * dist(rng);
  const float decay = 1.0f - 0.02f * 0.1f, step = -0.02f * 1.6f;

  BatchedNewtonSchulz ns(batch, m, n);
  DeviceBuffer<float> d_g(g), d_out(total), d_want(value), d_got(value);
  DeviceBuffer<testing::Bf16Bits> d_want_copy(total), d_got_copy(total);
  d_want_copy.Poison();
  d_got_copy.Poison();
  ns.Run(d_g.get(), d_out.get(), nullptr);
  ApplyUpdate(d_want.get(), d_out.get(), total, decay, step, testing::AsBf16(d_want_copy),
              nullptr);
  ns.RunApply(d_g.get(), d_got.get(), decay, step, testing::AsBf16(d_got_copy), total, total,
              nullptr);
  testing::Sync();
  EXPECT_EQ(d_got.Download(), d_want.Download());
  EXPECT_EQ(d_got_copy.Download(), d_want_copy.Download());
  EXPECT_NE(d_got.Download(), value) << "the apply changed nothing";
}

INSTANTIATE_TEST_SUITE_P(Shapes, NewtonSchulzTest,
                         ::testing::Values(Shape{3, 64, 96}, Shape{2, 96, 64},
                                           Shape{1, 128, 128}, Shape{4, 24, 40},
                                           Shape{2, 256, 64}, Shape{2, 70, 36},
                                           Shape{2, 384, 512}));

} // namespace
} // namespace trellis::kernels
