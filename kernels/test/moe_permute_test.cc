#include "kernels/moe_permute.h"

#include "kernels/ref/moe_layout.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

struct Case {
  int64_t tokens;
  int top_k;
  int experts;
  int64_t hidden;
};

// Skewed routing: experts drawn with weights ~ 1/(e+1)^1.5, and the last
// quarter of the experts never chosen, so groups are ragged and some empty.
std::vector<int32_t> SkewedTopK(std::mt19937_64& rng, const Case& c) {
  const int used = std::max(1, c.experts - c.experts / 4);
  std::vector<double> weights(used);
  for (int e = 0; e < used; ++e) weights[e] = 1.0 / std::pow(e + 1.0, 1.5);
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::vector<int32_t> ids(c.tokens * c.top_k);
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int j = 0; j < c.top_k; ++j) ids[t * c.top_k + j] = pick(rng);  // repeats allowed
  }
  return ids;
}

class MoePermuteTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoePermuteTest, LayoutPermuteUnpermuteCombineMatchTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Case c = GetParam();
  const int64_t slots = c.tokens * c.top_k;
  const std::vector<int32_t> ids = SkewedTopK(rng, c);
  const ref::MoeLayout want = ref::ComputeMoeLayoutRef(ids.data(), c.tokens, c.top_k, c.experts);

  DeviceBuffer<int32_t> d_ids(ids), d_offsets(c.experts + 1), d_row_to_slot(slots),
      d_slot_to_row(slots);
  const size_t ws_bytes = MoeLayoutWorkspaceBytes(slots, c.experts);
  DeviceBuffer<unsigned char> d_ws(ws_bytes);
  d_offsets.Poison();
  d_row_to_slot.Poison();
  d_slot_to_row.Poison();
  ComputeMoeLayout(d_ids.get(), c.tokens, c.top_k, c.experts, d_offsets.get(), d_row_to_slot.get(),
                   d_slot_to_row.get(), d_ws.get(), ws_bytes, nullptr);
  testing::Sync();
  EXPECT_EQ(d_offsets.Download(), want.offsets);
  EXPECT_EQ(d_row_to_slot.Download(), want.row_to_slot);
  EXPECT_EQ(d_slot_to_row.Download(), want.slot_to_row);

  const testing::Bf16Data x = testing::RandomBf16(rng, c.tokens * c.hidden);
  DeviceBuffer<Bf16Bits> d_x(x.bits), d_perm(slots * c.hidden), d_slots(slots * c.hidden);
  d_perm.Poison();
  MoePermute(AsBf16(d_x), d_row_to_slot.get(), slots, c.top_k, c.hidden, AsBf16(d_perm), nullptr);
  testing::Sync();
  std::vector<float> perm_want(slots * c.hidden);
  ref::PermuteRef(x.values.data(), want, c.top_k, c.hidden, perm_want.data());
  EXPECT_EQ(testing::Bf16ToFloats(d_perm.Download()), perm_want);

  // Unpermute and combine read "expert outputs": fresh values in dispatch order.
  const testing::Bf16Data y = testing::RandomBf16(rng, slots * c.hidden);
  DeviceBuffer<Bf16Bits> d_y(y.bits), d_out(c.tokens * c.hidden);
  d_slots.Poison();
  MoeUnpermute(AsBf16(d_y), d_slot_to_row.get(), slots, c.hidden, AsBf16(d_slots), nullptr);
  testing::Sync();
  std::vector<float> slots_want(slots * c.hidden);
  ref::UnpermuteRef(y.values.data(), want, c.hidden, slots_want.data());
  EXPECT_EQ(testing::Bf16ToFloats(d_slots.Download()), slots_want);

  std::vector<float> gates(slots);
  std::uniform_real_distribution<float> gate(0.0f, 1.0f);
  for (float& g : gates) g = gate(rng);
  DeviceBuffer<float> d_gates(gates);
  d_out.Poison();
  MoeCombine(AsBf16(d_y), d_gates.get(), d_slot_to_row.get(), c.tokens, c.top_k, c.hidden,
             AsBf16(d_out), nullptr);
  testing::Sync();
  std::vector<float> out_want(c.tokens * c.hidden);
  ref::CombineRef(y.values.data(), gates.data(), want, c.tokens, c.top_k, c.hidden,
                  out_want.data());
  const std::vector<float> out = testing::Bf16ToFloats(d_out.Download());
  EXPECT_EQ(testing::CountNaN(out), 0u);
  // Same fp32 operations in the same order; only the final bf16 rounding differs
  // from the fp32 reference.
  EXPECT_LT(testing::RelError(out, out_want), 4e-3);
  int64_t far = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    far += std::fabs(out[i] - out_want[i]) > std::fabs(out_want[i]) / 128.0f + 1e-30f;
  }
  EXPECT_EQ(far, 0) << "elements off by more than one bf16 rounding";
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoePermuteTest,
                         ::testing::Values(Case{1, 1, 1, 8}, Case{3, 2, 4, 64},
                                           Case{1000, 8, 64, 136}, Case{4096, 8, 64, 2048},
                                           Case{777, 4, 256, 32}, Case{50, 2, 8, 8}));

TEST(MoePermute, RejectsHiddenNotAMultipleOf8) {
  TRELLIS_SKIP_WITHOUT_GPU();
  DeviceBuffer<Bf16Bits> x(100), out(100);
  DeviceBuffer<int32_t> idx(10);
  EXPECT_THROW(MoePermute(AsBf16(x), idx.get(), 10, 1, 10, AsBf16(out), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace trellis::kernels
