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
  MoePermute(AsBf16(d_x), d_slot_to_row.get(), c.tokens, c.top_k, c.hidden, AsBf16(d_perm),
             nullptr);
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
                                           Case{777, 4, 256, 32}, Case{50, 2, 8, 8},
                                           Case{100, 12, 32, 64}));  // top_k above the unroll

// The two backward passes: the dispatch's (MoeCombine without gates) and the
// combine's (MoeCombineBackward), on a reference layout.
struct BackwardCase {
  Case shape;
  bool one_expert_per_token;  // every slot of a token on the same expert
};

class MoeBackwardTest : public ::testing::TestWithParam<BackwardCase> {};

// Elements that differ (NaN, i.e. poison never overwritten, always does).
int64_t CountDifferent(const std::vector<float>& got, const std::vector<float>& want) {
  int64_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += !(got[i] == want[i]);
  return n;
}

TEST_P(MoeBackwardTest, DispatchAndCombineBackwardMatchTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Case c = GetParam().shape;
  const int64_t slots = c.tokens * c.top_k;
  std::vector<int32_t> ids = SkewedTopK(rng, c);
  if (GetParam().one_expert_per_token) {
    for (int64_t s = 0; s < slots; ++s) ids[s] = ids[s - s % c.top_k];
  }
  const ref::MoeLayout layout = ref::ComputeMoeLayoutRef(ids.data(), c.tokens, c.top_k, c.experts);
  DeviceBuffer<int32_t> d_row_to_slot(layout.row_to_slot), d_slot_to_row(layout.slot_to_row);

  // Dispatch backward: every gate 1, the same fp32 adds in the same order as
  // the reference, so only the final bf16 rounding is left.
  const testing::Bf16Data grad_rows = testing::RandomBf16(rng, slots * c.hidden);
  DeviceBuffer<Bf16Bits> d_grad_rows(grad_rows.bits), d_grad_x(c.tokens * c.hidden);
  d_grad_x.Poison();
  MoeCombine(AsBf16(d_grad_rows), nullptr, d_slot_to_row.get(), c.tokens, c.top_k, c.hidden,
             AsBf16(d_grad_x), nullptr);
  testing::Sync();
  std::vector<float> grad_x_want(c.tokens * c.hidden);
  ref::CombineRef(grad_rows.values.data(), nullptr, layout, c.tokens, c.top_k, c.hidden,
                  grad_x_want.data());
  for (float& v : grad_x_want) v = ref::RoundToBf16(v);
  EXPECT_EQ(CountDifferent(testing::Bf16ToFloats(d_grad_x.Download()), grad_x_want), 0);

  const testing::Bf16Data grad_y = testing::RandomBf16(rng, c.tokens * c.hidden);
  const testing::Bf16Data expert_out = testing::RandomBf16(rng, slots * c.hidden);
  std::vector<float> gates(slots);
  std::uniform_real_distribution<float> gate(0.0f, 1.0f);
  for (float& g : gates) g = gate(rng);
  DeviceBuffer<Bf16Bits> d_grad_y(grad_y.bits), d_expert_out(expert_out.bits),
      d_grad_eo(slots * c.hidden);
  DeviceBuffer<float> d_gates(gates), d_grad_gates(slots);
  d_grad_eo.Poison();
  d_grad_gates.Poison();
  MoeCombineBackward(AsBf16(d_grad_y), AsBf16(d_expert_out), d_gates.get(), d_row_to_slot.get(),
                     c.tokens, c.top_k, c.hidden, AsBf16(d_grad_eo), d_grad_gates.get(), nullptr);
  testing::Sync();
  std::vector<float> grad_eo_want(slots * c.hidden), grad_gates_want(slots);
  ref::CombineBackwardRef(grad_y.values.data(), expert_out.values.data(), gates.data(), layout,
                          c.top_k, c.hidden, grad_eo_want.data(), grad_gates_want.data());
  // One fp32 product each, rounded to bf16 once: exact.
  for (float& v : grad_eo_want) v = ref::RoundToBf16(v);
  EXPECT_EQ(CountDifferent(testing::Bf16ToFloats(d_grad_eo.Download()), grad_eo_want), 0);

  // The dot products sum in another order (about hidden / 32 fmas per lane,
  // then 5 shuffle adds): within twice that many roundings of sum |terms|.
  const std::vector<float> grad_gates_got = d_grad_gates.Download();
  EXPECT_EQ(testing::CountNaN(grad_gates_got), 0u);
  const double steps = static_cast<double>(c.hidden) / 32 + 16;
  int64_t far = 0;
  for (int64_t r = 0; r < slots; ++r) {
    const int64_t s = layout.row_to_slot[r], t = s / c.top_k;
    double abs_sum = 0.0;
    for (int64_t h = 0; h < c.hidden; ++h) {
      abs_sum += std::fabs(double(grad_y.values[t * c.hidden + h]) *
                           expert_out.values[r * c.hidden + h]);
    }
    const double tol = 2 * steps * std::ldexp(1.0, -24) * abs_sum + 1e-30;
    far += !(std::fabs(double(grad_gates_got[s]) - grad_gates_want[s]) <= tol);
  }
  EXPECT_EQ(far, 0) << "gate gradients off by more than fp32 summation error";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeBackwardTest,
    ::testing::Values(BackwardCase{{1, 1, 1, 8}, false}, BackwardCase{{300, 1, 16, 136}, false},
                      BackwardCase{{257, 2, 8, 200}, true}, BackwardCase{{513, 4, 1, 72}, false},
                      BackwardCase{{64, 4, 32, 8}, true}, BackwardCase{{1000, 8, 64, 2048}, false},
                      BackwardCase{{600, 8, 64, 1032}, true},
                      BackwardCase{{256, 8, 256, 7168}, false}));

TEST(MoePermute, RejectsHiddenNotAMultipleOf8) {
  TRELLIS_SKIP_WITHOUT_GPU();
  DeviceBuffer<Bf16Bits> x(100), out(100);
  DeviceBuffer<int32_t> idx(10);
  EXPECT_THROW(MoePermute(AsBf16(x), idx.get(), 10, 1, 10, AsBf16(out), nullptr),
               std::invalid_argument);
  DeviceBuffer<float> gates(10), grad_gates(10);
  EXPECT_THROW(MoeCombineBackward(AsBf16(x), AsBf16(x), gates.get(), idx.get(), 10, 1, 10,
                                  AsBf16(out), grad_gates.get(), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace trellis::kernels
