// SwiGluForward, SwiGluBackward and their row-strided variants against
// kernels/ref/swiglu_ref.h on fresh inputs. Not bit for bit: the device's expf
// and the host's may round apart (CUDA's is within 2 ulp) while every other
// step is the same IEEE-rounded operation, so each output may lie one bf16 ulp
// from the reference's.
#include "kernels/swiglu.h"

#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/ref/swiglu_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::ExpectInvalid;
using testing::Bf16Bits;
using testing::DeviceBuffer;

using testing::kPoisonSlack;

bool IsNaN(Bf16Bits v) { return (v & 0x7fff) > 0x7f80; }

// Steps between two bf16 values; +0 and -0 are one point.
int64_t UlpDistance(Bf16Bits x, Bf16Bits y) {
  auto ordered = [](Bf16Bits v) { return (v & 0x8000) ? -int64_t{v & 0x7fff} : int64_t{v}; };
  return std::llabs(ordered(x) - ordered(y));
}

bool WithinOneUlp(Bf16Bits got, float want) {
  const Bf16Bits w = ref::FloatToBf16(want);
  return !IsNaN(got) && !IsNaN(w) && UlpDistance(got, w) <= 1;
}

// got holds the output at [off, off + want.size()) and poison around it.
void ExpectWithinOneUlp(const std::vector<Bf16Bits>& got, int64_t off,
                        const std::vector<float>& want, const char* what) {
  testing::ExpectPoisonAround(got, off, want.size(), what);
  for (size_t i = 0; i < want.size(); ++i) {
    const Bf16Bits g = got[off + i];
    ASSERT_TRUE(WithinOneUlp(g, want[i]))
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

// The row-strided variants on a packed [rows, in_stride] buffer, gate (a) in
// columns [0, width), up (b) in [width, 2 * width), as one grouped GEMM writes
// them. in_stride = 2 * width is the packed layout; a larger one leaves gaps
// that hold poison, which the inputs must not feed into h (NaN would show) and
// the backward must leave as it is. The 4097-row cases of width 768 (vector)
// and 100 (scalar) make the grid stride on a 132-SM device; width 12 and
// in_stride 52 take the scalar path, width 8 in one row the flat one.
struct RowsCase {
  int64_t rows;
  int64_t width;
  int64_t in_stride;
};

class SwiGluRowsTest : public ::testing::TestWithParam<RowsCase> {};

// The packed buffer's bits (poison in the gaps and kPoisonSlack after it), and
// a and b as dense [rows, width] values for the reference.
struct Packed {
  std::vector<Bf16Bits> bits;
  std::vector<float> a, b;
};

Packed PackedInputs(std::mt19937_64& rng, const RowsCase& c) {
  const testing::Bf16Data a = GateInputs(rng, c.rows * c.width);
  const testing::Bf16Data b = testing::RandomBf16(rng, c.rows * c.width);
  Packed p{std::vector<Bf16Bits>(c.rows * c.in_stride + kPoisonSlack, testing::kPoisonBf16),
           a.values, b.values};
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.width; ++j) {
      p.bits[r * c.in_stride + j] = a.bits[r * c.width + j];
      p.bits[r * c.in_stride + c.width + j] = b.bits[r * c.width + j];
    }
  }
  return p;
}

TEST_P(SwiGluRowsTest, PackedForwardMatchesTheReferenceRowByRow) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const RowsCase c = GetParam();
  const Packed in = PackedInputs(rng, c);
  std::vector<float> want(c.rows * c.width);
  for (int64_t r = 0; r < c.rows; ++r) {
    const int64_t o = r * c.width;
    ref::SwiGluForwardRef(in.a.data() + o, in.b.data() + o, c.width, want.data() + o);
  }

  DeviceBuffer<Bf16Bits> d_in(in.bits), d_h(c.rows * c.width + kPoisonSlack);
  d_h.Poison();
  SwiGluForwardRows(AsBf16(d_in), AsBf16(d_in) + c.width, c.rows, c.width, c.in_stride,
                    AsBf16(d_h), nullptr);
  testing::Sync();
  ExpectWithinOneUlp(d_h.Download(), 0, want, "h");
}

TEST_P(SwiGluRowsTest, PackedBackwardMatchesTheReferenceRowByRow) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const RowsCase c = GetParam();
  const Packed in = PackedInputs(rng, c);
  const testing::Bf16Data g = testing::RandomBf16(rng, c.rows * c.width);
  std::vector<float> want_a(c.rows * c.width), want_b(c.rows * c.width);
  for (int64_t r = 0; r < c.rows; ++r) {
    const int64_t o = r * c.width;
    ref::SwiGluBackwardRef(g.values.data() + o, in.a.data() + o, in.b.data() + o, c.width,
                           want_a.data() + o, want_b.data() + o);
  }

  // grad_a and grad_b interleaved in one packed buffer, like the inputs.
  DeviceBuffer<Bf16Bits> d_g(g.bits), d_in(in.bits), d_grad(c.rows * c.in_stride + kPoisonSlack);
  d_grad.Poison();
  SwiGluBackwardRows(AsBf16(d_g), AsBf16(d_in), AsBf16(d_in) + c.width, c.rows, c.width,
                     c.in_stride, AsBf16(d_grad), AsBf16(d_grad) + c.width, nullptr);
  testing::Sync();
  const std::vector<Bf16Bits> got = d_grad.Download();
  for (int64_t k = 0; k < static_cast<int64_t>(got.size()); ++k) {
    const int64_t r = k / c.in_stride, j = k % c.in_stride;
    if (r >= c.rows || j >= 2 * c.width) {
      ASSERT_EQ(got[k], testing::kPoisonBf16) << "wrote into the gap at row " << r << " col " << j;
      continue;
    }
    const bool is_a = j < c.width;
    const int64_t i = r * c.width + (is_a ? j : j - c.width);
    const float want = is_a ? want_a[i] : want_b[i];
    ASSERT_TRUE(WithinOneUlp(got[k], want))
        << (is_a ? "grad_a" : "grad_b") << " row " << r << " col " << i - r * c.width << ": got "
        << ref::Bf16ToFloat(got[k]) << ", want " << want;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SwiGluRowsTest,
    ::testing::Values(RowsCase{1, 8, 16}, RowsCase{5, 768, 1536}, RowsCase{3, 12, 24},
                      RowsCase{4097, 64, 128}, RowsCase{4097, 768, 1536},
                      RowsCase{4097, 100, 200}, RowsCase{7, 16, 40}, RowsCase{4, 24, 52}));

// Checked before any CUDA call: runs without a device too. The row-strided
// calls' pointers point into a host buffer, never read.
TEST(SwiGluArgs, RejectsBadSizesAndAcceptsNothingToDo) {
  EXPECT_THROW(SwiGluForward(nullptr, nullptr, -1, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(SwiGluBackward(nullptr, nullptr, nullptr, 4, nullptr, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_NO_THROW(SwiGluForward(nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_NO_THROW(SwiGluBackward(nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr));

  std::vector<Bf16Bits> host(1024);
  auto* p = reinterpret_cast<__nv_bfloat16*>(host.data());
  auto fwd = [&](int64_t rows, int64_t width, int64_t in_stride, __nv_bfloat16* h) {
    return [=] { SwiGluForwardRows(p, p + width, rows, width, in_stride, h, nullptr); };
  };
  auto bwd = [&](int64_t rows, int64_t width, int64_t in_stride, __nv_bfloat16* grad_a) {
    return [=] {
      SwiGluBackwardRows(p, p, p + width, rows, width, in_stride, grad_a, p + 512, nullptr);
    };
  };
  ExpectInvalid(fwd(2, 8, 7, p + 512), "SwiGluForwardRows: in_stride must be >= width");
  ExpectInvalid(bwd(2, 8, 7, p + 256), "SwiGluBackwardRows: in_stride must be >= width");
  ExpectInvalid(fwd(0, 8, 7, nullptr), "in_stride must be >= width");
  ExpectInvalid(fwd(-1, 8, 16, p + 512), "SwiGluForwardRows: rows and width must be >= 0");
  ExpectInvalid(bwd(2, -8, 16, p + 256), "SwiGluBackwardRows: rows and width must be >= 0");
  ExpectInvalid(fwd(2, 8, 16, nullptr), "SwiGluForwardRows: buffers must be non-null");
  ExpectInvalid(bwd(2, 8, 16, nullptr), "SwiGluBackwardRows: buffers must be non-null");
  EXPECT_NO_THROW(SwiGluForwardRows(nullptr, nullptr, 0, 768, 1536, nullptr, nullptr));
  EXPECT_NO_THROW(SwiGluForwardRows(nullptr, nullptr, 5, 0, 0, nullptr, nullptr));
  EXPECT_NO_THROW(
      SwiGluBackwardRows(nullptr, nullptr, nullptr, 0, 768, 1536, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace trellis::kernels
