// Rope against kernels/ref/rope_ref.h on fresh inputs, bit for bit: cos and
// sin are inputs (no transcendental function runs on either side), both take
// the same IEEE-rounded fp32 steps in the same order, and both round to bf16
// to nearest even.
#include "kernels/rope.h"

#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/ref/rope_ref.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::ExpectInvalid;
using testing::Bf16Bits;
using testing::DeviceBuffer;

using testing::kPoisonSlack;

// got holds the output at [off, off + want.size()) and poison around it.
void ExpectBitsEqual(const std::vector<Bf16Bits>& got, int64_t off,
                     const std::vector<float>& want) {
  testing::ExpectPoisonAround(got, off, want.size(), "out");
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[off + i], ref::FloatToBf16(want[i]))
        << "element " << i << ": got " << ref::Bf16ToFloat(got[off + i]) << ", want " << want[i];
  }
}

// cos and sin of random angles, one spare row past seq_len (never read).
void RandomTable(std::mt19937_64& rng, int64_t n, std::vector<float>& cos,
                 std::vector<float>& sin) {
  std::uniform_real_distribution<double> angle(-4.0, 4.0);
  cos.resize(n);
  sin.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const double a = angle(rng);
    cos[i] = static_cast<float>(std::cos(a));
    sin[i] = static_cast<float>(std::sin(a));
  }
}

// x_off, out_off and table_off (whole elements) move the pointers off 16-byte
// alignment, which, like half % 8 != 0 or an x_row_stride % 8 != 0, takes the
// scalar path.
struct Case {
  int64_t rows;
  int64_t seq_len;
  int heads;
  int head_dim;
  int64_t x_row_stride;
  int64_t x_off;
  int64_t out_off;
  int64_t table_off;
  bool inverse;
};

class RopeTest : public ::testing::TestWithParam<Case> {};

TEST_P(RopeTest, MatchesTheReferenceBitForBit) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Case& k = GetParam();
  const int64_t width = int64_t{k.heads} * k.head_dim, half = k.head_dim / 2;
  const testing::Bf16Data x = testing::RandomBf16(rng, k.x_off + k.rows * k.x_row_stride);
  std::vector<float> cos, sin;
  RandomTable(rng, k.table_off + (k.seq_len + 1) * half, cos, sin);
  std::vector<float> want(k.rows * width);
  ref::RopeRef(x.values.data() + k.x_off, k.x_row_stride, k.rows, k.seq_len, k.heads,
               k.head_dim, cos.data() + k.table_off, sin.data() + k.table_off, k.inverse,
               want.data());

  DeviceBuffer<Bf16Bits> d_x(x.bits), d_out(k.out_off + want.size() + kPoisonSlack);
  DeviceBuffer<float> d_cos(cos), d_sin(sin);
  d_out.Poison();
  Rope(AsBf16(d_x) + k.x_off, k.x_row_stride, k.rows, k.seq_len, k.heads, k.head_dim,
       d_cos.get() + k.table_off, d_sin.get() + k.table_off, k.inverse,
       AsBf16(d_out) + k.out_off, nullptr);
  testing::Sync();
  ExpectBitsEqual(d_out.Download(), k.out_off, want);
}

// q and k of a [q | k | v] GEMM row (16 and 4 heads of 128, stride 3072),
// both directions; 4096 rows need more threads than the grid has; fewer rows
// than seq_len; half = 8, the smallest vector case; then the scalar path:
// head_dim 6, half 12, a stride % 8 != 0 and each pointer off alignment.
INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeTest,
    ::testing::Values(Case{300, 100, 16, 128, 3072, 0, 0, 0, false},
                      Case{300, 100, 16, 128, 3072, 0, 0, 0, true},
                      Case{300, 100, 4, 128, 3072, 2048, 0, 0, false},
                      Case{4096, 1024, 16, 128, 3072, 0, 0, 0, true},
                      Case{5, 100, 16, 128, 2048, 0, 0, 0, false},
                      Case{100, 7, 3, 16, 56, 0, 0, 0, false},
                      Case{37, 10, 5, 6, 33, 0, 0, 0, false},
                      Case{37, 10, 5, 6, 33, 0, 0, 0, true},
                      Case{64, 64, 2, 24, 50, 0, 0, 0, false},
                      Case{50, 20, 2, 128, 260, 0, 0, 0, true},
                      Case{300, 100, 16, 128, 3072, 1, 0, 0, false},
                      Case{300, 100, 16, 128, 3072, 0, 3, 0, true},
                      Case{100, 7, 3, 16, 56, 0, 0, 1, false}));

// Checked before any CUDA call: runs without a device too. The pointers point
// into a host buffer, never read.
TEST(RopeArgs, RejectsBadArgumentsAndAcceptsNothingToDo) {
  std::vector<Bf16Bits> host(1 << 16);
  std::vector<float> table(1 << 12);
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(host.data());
  auto* out = reinterpret_cast<__nv_bfloat16*>(host.data()) + (1 << 15);
  const float* t = table.data();
  auto rope = [&](const __nv_bfloat16* xp, int64_t stride, int64_t rows, int64_t seq_len,
                  int heads, int head_dim, __nv_bfloat16* op) {
    return [=] { Rope(xp, stride, rows, seq_len, heads, head_dim, t, t, false, op, nullptr); };
  };
  ExpectInvalid(rope(x, 64, 4, 4, 2, 7, out), "head_dim must be even");
  ExpectInvalid(rope(x, 64, 4, 4, 2, 0, out), "head_dim must be even");
  ExpectInvalid(rope(x, 64, 4, 4, 0, 8, out), "heads must be > 0");
  ExpectInvalid(rope(x, 64, 4, 0, 2, 8, out), "seq_len must be > 0");
  ExpectInvalid(rope(x, 64, -1, 4, 2, 8, out), "rows must be >= 0");
  ExpectInvalid(rope(x, 15, 4, 4, 2, 8, out), "x_row_stride");
  ExpectInvalid(rope(nullptr, 16, 4, 4, 2, 8, out), "non-null");
  ExpectInvalid(rope(x, 16, 4, 4, 2, 8, nullptr), "non-null");
  // out starts inside x's last row, and x inside out.
  ExpectInvalid(rope(x, 64, 4, 4, 2, 8, const_cast<__nv_bfloat16*>(x) + 3 * 64 + 15),
                "must not overlap");
  ExpectInvalid(rope(out + 10, 16, 4, 4, 2, 8, out), "must not overlap");
  EXPECT_NO_THROW(Rope(nullptr, 128, 0, 1, 1, 128, nullptr, nullptr, false, nullptr, nullptr));
  EXPECT_NO_THROW(Rope(nullptr, 3072, 0, 100, 16, 128, nullptr, nullptr, true, nullptr, nullptr));
}

}  // namespace
}  // namespace trellis::kernels
