#include "kernels/muon_update.h"

#include "kernels/ref/optim_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::DeviceBuffer;

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
  MuonMomentum(d_grad.get() + off, d_mom.get() + off, d_update.get() + off, n, momentum, nullptr);
  testing::Sync();
  auto got_mom = d_mom.Download(), got_update = d_update.Download();
  EXPECT_EQ(std::vector<float>(got_mom.begin() + off, got_mom.end()), want_mom);
  EXPECT_EQ(std::vector<float>(got_update.begin() + off, got_update.end()), want_update);

  // The bf16 update from the same momentum: the fp32 update rounded once.
  d_mom.Upload(mom);
  MuonMomentum(d_grad.get() + off, d_mom.get() + off, testing::AsBf16(d_update16) + off, n,
               momentum, nullptr);
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

}  // namespace
}  // namespace trellis::kernels
