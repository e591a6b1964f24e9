// SwiGluForward and SwiGluBackward against kernels/ref/swiglu_ref.h on fresh
// inputs. Not bit for bit: the device's expf and the host's may round apart
// (CUDA's is within 2 ulp) while every other step is the same IEEE-rounded
// operation, so each output may lie one bf16 ulp from the reference's.
#include "kernels/swiglu.h"

#include <iterator>

#include "kernels/ref/swiglu_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

using testing::kPoisonSlack;

bool IsNaN(Bf16Bits v) { return (v & 0x7fff) > 0x7f80; }

// Steps between two bf16 values; +0 and -0 are one point.
int64_t UlpDistance(Bf16Bits x, Bf16Bits y) {
  auto ordered = [](Bf16Bits v) { return (v & 0x8000) ? -int64_t{v & 0x7fff} : int64_t{v}; };
  return std::llabs(ordered(x) - ordered(y));
}

// got holds the output at [off, off + want.size()) and poison around it.
void ExpectWithinOneUlp(const std::vector<Bf16Bits>& got, int64_t off,
                        const std::vector<float>& want, const char* what) {
  testing::ExpectPoisonAround(got, off, want.size(), what);
  for (size_t i = 0; i < want.size(); ++i) {
    const Bf16Bits w = ref::FloatToBf16(want[i]), g = got[off + i];
    ASSERT_TRUE(!IsNaN(g) && !IsNaN(w) && UlpDistance(g, w) <= 1)
        << what << " element " << i << ": got " << ref::Bf16ToFloat(g) << ", want " << want[i];
  }
}

// a spans sigmoid's curve (stddev 4) and, every 61st element, values where
// exp(-a) overflows or underflows, up to bf16's largest finite values.
testing::Bf16Data GateInputs(std::mt19937_64& rng, int64_t n) {
  testing::Bf16Data d = testing::RandomBf16(rng, n, 4.0f);
  constexpr float kEdges[] = {-3.0e38f, -1e4f, -100.0f, -89.0f, -88.0f, -87.0f,
                              17.0f,    89.0f, 100.0f,  1e4f,   3.0e38f};
  for (int64_t i = 0; i < n; i += 61) {
    d.bits[i] = ref::FloatToBf16(kEdges[(i / 61) % std::size(kEdges)]);
    d.values[i] = ref::Bf16ToFloat(d.bits[i]);
  }
  return d;
}

// Sizes with and without a tail of 1..7; offsets of whole elements that make
// the inputs, the outputs or both unaligned (the scalar path); 2^22 + 3 makes
// the grid stride.
struct Case {
  int64_t n;
  int64_t in_off;
  int64_t out_off;
};

class SwiGluTest : public ::testing::TestWithParam<Case> {};

TEST_P(SwiGluTest, ForwardMatchesTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [n, in_off, out_off] = GetParam();
  const testing::Bf16Data a = GateInputs(rng, n + in_off);
  const testing::Bf16Data b = testing::RandomBf16(rng, n + in_off);
  std::vector<float> want(n);
  ref::SwiGluForwardRef(a.values.data() + in_off, b.values.data() + in_off, n, want.data());

  DeviceBuffer<Bf16Bits> d_a(a.bits), d_b(b.bits), d_h(n + out_off + kPoisonSlack);
  d_h.Poison();
  SwiGluForward(AsBf16(d_a) + in_off, AsBf16(d_b) + in_off, n, AsBf16(d_h) + out_off, nullptr);
  testing::Sync();
  ExpectWithinOneUlp(d_h.Download(), out_off, want, "h");
}

TEST_P(SwiGluTest, BackwardMatchesTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const auto [n, in_off, out_off] = GetParam();
  const testing::Bf16Data a = GateInputs(rng, n + in_off);
  const testing::Bf16Data b = testing::RandomBf16(rng, n + in_off);
  const testing::Bf16Data g = testing::RandomBf16(rng, n + in_off);
  std::vector<float> want_a(n), want_b(n);
  ref::SwiGluBackwardRef(g.values.data() + in_off, a.values.data() + in_off,
                         b.values.data() + in_off, n, want_a.data(), want_b.data());

  DeviceBuffer<Bf16Bits> d_g(g.bits), d_a(a.bits), d_b(b.bits);
  DeviceBuffer<Bf16Bits> d_grad_a(n + out_off + kPoisonSlack), d_grad_b(n + out_off + kPoisonSlack);
  d_grad_a.Poison();
  d_grad_b.Poison();
  SwiGluBackward(AsBf16(d_g) + in_off, AsBf16(d_a) + in_off, AsBf16(d_b) + in_off, n,
                 AsBf16(d_grad_a) + out_off, AsBf16(d_grad_b) + out_off, nullptr);
  testing::Sync();
  ExpectWithinOneUlp(d_grad_a.Download(), out_off, want_a, "grad_a");
  ExpectWithinOneUlp(d_grad_b.Download(), out_off, want_b, "grad_b");
}

INSTANTIATE_TEST_SUITE_P(Sizes, SwiGluTest,
                         ::testing::Values(Case{1, 0, 0}, Case{7, 0, 0}, Case{8, 0, 0},
                                           Case{4096, 0, 0}, Case{100003, 0, 0}, Case{4099, 1, 1},
                                           Case{4103, 0, 3}, Case{4104, 5, 0},
                                           Case{(1 << 22) + 3, 0, 0}));

// Checked before any CUDA call: runs without a device too.
TEST(SwiGluArgs, RejectsBadSizesAndAcceptsNothingToDo) {
  EXPECT_THROW(SwiGluForward(nullptr, nullptr, -1, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(SwiGluBackward(nullptr, nullptr, nullptr, 4, nullptr, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_NO_THROW(SwiGluForward(nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_NO_THROW(SwiGluBackward(nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace trellis::kernels
