// RmsNormForward and RmsNormBackward against an fp64 reference on the host, on
// fresh inputs. y (the residual sum) must be the host's fp32 sum rounded to
// bf16, bit for bit; the bf16 outputs within one bf16 ulp of fp64 (plus the
// fp32 sums' error where backward cancels); rstd and the weight's fp32
// gradient within fp32 summation error; the weight's gradient the same bits on
// a second run.
#include "kernels/rms_norm.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

struct Case {
  int64_t rows, h;
  bool add;  // the residual add in forward
  bool res;  // a residual gradient in backward
};

class RmsNormTest : public ::testing::TestWithParam<Case> {};

TEST_P(RmsNormTest, ForwardAndBackwardMatchFp64) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Case c = GetParam();
  const int64_t n = c.rows * c.h;
  const float eps = 1e-5f;
  const testing::Bf16Data x = testing::RandomBf16(rng, n, 2.0f);
  const testing::Bf16Data a = testing::RandomBf16(rng, n);
  const testing::Bf16Data w = testing::RandomBf16(rng, c.h);
  const testing::Bf16Data g_out = testing::RandomBf16(rng, n);
  const testing::Bf16Data g_res = testing::RandomBf16(rng, n, 0.5f);

  // Forward on the host.
  std::vector<float> y(n);
  std::vector<Bf16Bits> y_bits(n);
  for (int64_t i = 0; i < n; ++i) {
    y_bits[i] = c.add ? ref::FloatToBf16(x.values[i] + a.values[i]) : x.bits[i];
    y[i] = ref::Bf16ToFloat(y_bits[i]);
  }
  std::vector<double> rstd(c.rows), out(n);
  for (int64_t r = 0; r < c.rows; ++r) {
    double ss = 0.0;
    for (int64_t j = 0; j < c.h; ++j) ss += double(y[r * c.h + j]) * y[r * c.h + j];
    rstd[r] = 1.0 / std::sqrt(ss / c.h + eps);
    for (int64_t j = 0; j < c.h; ++j) out[r * c.h + j] = y[r * c.h + j] * rstd[r] * w.values[j];
  }

  DeviceBuffer<Bf16Bits> d_x(x.bits), d_a(a.bits), d_w(w.bits), d_y(n), d_out(n);
  DeviceBuffer<float> d_rstd(c.rows);
  d_y.Poison(), d_out.Poison(), d_rstd.Poison();
  RmsNormForward(AsBf16(d_x), c.add ? AsBf16(d_a) : nullptr, AsBf16(d_w), c.rows, c.h, eps,
                 c.add ? AsBf16(d_y) : nullptr, AsBf16(d_out), d_rstd.get(), nullptr);
  if (c.add) {
    EXPECT_EQ(d_y.Download(), y_bits) << "y = bf16(x + a)";
  }
  const std::vector<float> got_rstd = d_rstd.Download();
  const std::vector<float> got_out = testing::Bf16ToFloats(d_out.Download());
  int64_t bad = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    if (!(std::fabs(got_rstd[r] - rstd[r]) <= 1e-5 * rstd[r]) && ++bad <= 3)
      ADD_FAILURE() << "rstd[" << r << "] " << got_rstd[r] << ", want " << rstd[r];
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::fabs(got_out[i] - out[i]) <= std::ldexp(std::fabs(out[i]), -7) + 1e-30) &&
        ++bad <= 6)
      ADD_FAILURE() << "out[" << i << "] " << got_out[i] << ", want " << out[i];
  }
  EXPECT_EQ(bad, 0);

  // Backward on the host, from the fp64 rstd.
  std::vector<double> g_y(n), g_y_tol(n), g_w(c.h, 0.0), g_w_scale(c.h, 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    double dot = 0.0, dot_abs = 0.0;
    for (int64_t j = 0; j < c.h; ++j) {
      const int64_t i = r * c.h + j;
      const double t = double(g_out.values[i]) * w.values[j] * y[i] * rstd[r];
      dot += t;
      dot_abs += std::fabs(t);
    }
    const double mean = dot / c.h, mean_abs = dot_abs / c.h;
    for (int64_t j = 0; j < c.h; ++j) {
      const int64_t i = r * c.h + j;
      const double nv = y[i] * rstd[r], dn = double(g_out.values[i]) * w.values[j];
      const double res = c.res ? g_res.values[i] : 0.0;
      g_y[i] = rstd[r] * (dn - nv * mean) + res;
      const double scale = rstd[r] * (std::fabs(dn) + std::fabs(nv) * mean_abs) + std::fabs(res);
      g_y_tol[i] = std::ldexp(std::fabs(g_y[i]), -7) + 1e-5 * scale;
      g_w[j] += g_out.values[i] * nv;
      g_w_scale[j] += std::fabs(g_out.values[i] * nv);
    }
  }
  DeviceBuffer<Bf16Bits> d_g_out(g_out.bits), d_g_res(g_res.bits), d_g_y(n);
  DeviceBuffer<float> d_g_w(c.h), d_ws(RmsNormBackwardWorkspace(c.rows, c.h));
  d_g_y.Poison(), d_g_w.Poison(), d_ws.Poison();
  const __nv_bfloat16* y_dev = c.add ? AsBf16(d_y) : AsBf16(d_x);
  RmsNormBackward(AsBf16(d_g_out), c.res ? AsBf16(d_g_res) : nullptr, y_dev, AsBf16(d_w),
                  d_rstd.get(), c.rows, c.h, AsBf16(d_g_y), d_g_w.get(), d_ws.get(), nullptr);
  const std::vector<float> got_g_y = testing::Bf16ToFloats(d_g_y.Download());
  const std::vector<float> got_g_w = d_g_w.Download();
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::fabs(got_g_y[i] - g_y[i]) <= g_y_tol[i]) && ++bad <= 6)
      ADD_FAILURE() << "g_y[" << i << "] " << got_g_y[i] << ", want " << g_y[i];
  }
  for (int64_t j = 0; j < c.h; ++j) {
    if (!(std::fabs(got_g_w[j] - g_w[j]) <= 1e-5 * g_w_scale[j] + 1e-30) && ++bad <= 6)
      ADD_FAILURE() << "g_w[" << j << "] " << got_g_w[j] << ", want " << g_w[j];
  }
  EXPECT_EQ(bad, 0);

  d_g_w.Poison();
  RmsNormBackward(AsBf16(d_g_out), c.res ? AsBf16(d_g_res) : nullptr, y_dev, AsBf16(d_w),
                  d_rstd.get(), c.rows, c.h, AsBf16(d_g_y), d_g_w.get(), d_ws.get(), nullptr);
  EXPECT_EQ(d_g_w.Download(), got_g_w) << "the weight's gradient differs on a second run";
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(Case{1, 8, false, false}, Case{37, 64, true, false},
                                           Case{5, 200, true, true}, Case{130, 2048, true, true},
                                           Case{513, 768, false, true},
                                           Case{1000, 2048, false, false},
                                           Case{64, 4096, true, true}, Case{3, 4096, false, false},
                                           Case{2049, 256, true, true}));

TEST(RmsNorm, NoRowsGivesAZeroWeightGradient) {
  TRELLIS_SKIP_WITHOUT_GPU();
  const int64_t h = 64;
  DeviceBuffer<Bf16Bits> one(h);
  DeviceBuffer<float> rstd(1), g_w(h), ws(RmsNormBackwardWorkspace(0, h));
  g_w.Poison(), ws.Poison();
  RmsNormForward(AsBf16(one), nullptr, AsBf16(one), 0, h, 1e-5f, nullptr, AsBf16(one), rstd.get(),
                 nullptr);
  RmsNormBackward(AsBf16(one), nullptr, AsBf16(one), AsBf16(one), rstd.get(), 0, h, AsBf16(one),
                  g_w.get(), ws.get(), nullptr);
  EXPECT_EQ(g_w.Download(), std::vector<float>(h, 0.0f));
}

TEST(RmsNorm, RejectsBadArguments) {
  const auto* p = reinterpret_cast<const __nv_bfloat16*>(256);
  auto* q = reinterpret_cast<__nv_bfloat16*>(512);
  auto* f = reinterpret_cast<float*>(1024);
  auto forward = [&](int64_t rows, int64_t h, const __nv_bfloat16* x, const __nv_bfloat16* a,
                     __nv_bfloat16* y) {
    return [=] { RmsNormForward(x, a, p, rows, h, 1e-5f, y, q, f, nullptr); };
  };
  testing::ExpectInvalid(forward(4, 12, p, nullptr, nullptr),
                         "h must be a multiple of 8 in [8, 4096], got 12");
  testing::ExpectInvalid(forward(4, 4104, p, nullptr, nullptr), "got 4104");
  testing::ExpectInvalid(forward(-1, 64, p, nullptr, nullptr), "rows must be >= 0");
  testing::ExpectInvalid(forward(4, 64, p + 1, nullptr, nullptr), "16-byte aligned");
  testing::ExpectInvalid(forward(4, 64, nullptr, nullptr, nullptr), "non-null");
  testing::ExpectInvalid(forward(4, 64, p, p, nullptr), "a and y go together");
  testing::ExpectInvalid(
      [&] { RmsNormBackward(p, nullptr, p, p, f, 4, 64, q, f, nullptr, nullptr); }, "non-null");
  testing::ExpectInvalid([&] { RmsNormBackward(p, p + 4, p, p, f, 4, 64, q, f, f, nullptr); },
                         "16-byte aligned");
}

}  // namespace
}  // namespace trellis::kernels
