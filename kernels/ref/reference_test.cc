#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ref/bf16.h"
#include "kernels/ref/cross_entropy_ref.h"
#include "kernels/ref/dense_ref.h"
#include "kernels/ref/fp8_e4m3.h"
#include "kernels/ref/moe_layout.h"
#include "kernels/ref/rope_ref.h"
#include "kernels/ref/swiglu_ref.h"
#include "kernels/ref/tile_map.h"

namespace trellis::kernels::ref {
namespace {

TEST(E4M3, DecodesKnownCodes) {
  EXPECT_EQ(DecodeE4M3(0x00), 0.0f);
  EXPECT_EQ(DecodeE4M3(0x38), 1.0f);
  EXPECT_EQ(DecodeE4M3(0x7e), 448.0f);
  EXPECT_EQ(DecodeE4M3(0xfe), -448.0f);
  EXPECT_EQ(DecodeE4M3(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(DecodeE4M3(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(DecodeE4M3(0x7f)));
  EXPECT_TRUE(std::isnan(DecodeE4M3(0xff)));
}

TEST(E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(EncodeE4M3(DecodeE4M3(c)), c) << "code " << c;
  }
}

TEST(E4M3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(EncodeE4M3(1e6f), 0x7e);
  EXPECT_EQ(EncodeE4M3(-460.0f), 0xfe);
  EXPECT_EQ(EncodeE4M3(INFINITY), 0x7e);
  EXPECT_EQ(EncodeE4M3(NAN), 0x7f);
}

TEST(E4M3, TiesGoToEven) {
  EXPECT_EQ(EncodeE4M3(std::ldexp(1.0f, -10)), 0x00);      // half the smallest subnormal
  EXPECT_EQ(EncodeE4M3(3 * std::ldexp(1.0f, -10)), 0x02);  // 1.5 quanta -> 2
  EXPECT_EQ(EncodeE4M3(1.0625f), 0x38);                    // between 1 and 1.125
  EXPECT_EQ(EncodeE4M3(1.1875f), 0x3a);                    // between 1.125 and 1.25
}

TEST(E4M3, EncodesToTheNearestCode) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exp_dist(-12.0f, 9.0f);
  for (int i = 0; i < 20000; ++i) {
    float x = std::exp2(exp_dist(rng)) * (rng() % 2 ? 1.0f : -1.0f);
    float got = DecodeE4M3(EncodeE4M3(x));
    float best = INFINITY;
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7f) != 0x7f) best = std::min(best, std::fabs(DecodeE4M3(c) - x));
    }
    if (std::fabs(x) <= 448.0f) {
      ASSERT_EQ(std::fabs(got - x), best) << x;
    }
  }
}

TEST(Fp8Blockwise, ErrorIsBoundedByTheBlockMax) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int64_t n = 5 * kFp8BlockSize + 37;  // partial last block
  std::vector<float> x(n), back(n), scales(Fp8NumBlocks(n));
  std::vector<uint8_t> q(n);
  for (float& v : x) v = dist(rng);
  for (int i = 128; i < 256; ++i) x[i] = 0.0f;  // a zero block
  QuantizeFp8BlockwiseRef(x.data(), n, q.data(), scales.data());
  DequantizeFp8BlockwiseRef(q.data(), scales.data(), n, back.data());
  EXPECT_EQ(scales[1], 1.0f);
  for (int64_t b = 0; b < Fp8NumBlocks(n); ++b) {
    float amax = 0.0f;
    for (int64_t i = b * 128; i < std::min(n, b * 128 + 128); ++i) amax = std::max(amax, std::fabs(x[i]));
    for (int64_t i = b * 128; i < std::min(n, b * 128 + 128); ++i) {
      // 3 mantissa bits: half a step is 1/16 of the value's power of two.
      EXPECT_LE(std::fabs(back[i] - x[i]), amax / 16.0f + 1e-6f) << i;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie -> even
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
}

TEST(MoeLayout, GroupsSlotsByExpertInStableOrder) {
  // 4 tokens, top-2, 3 experts; expert 2 gets nothing... expert 1 gets 4 slots.
  const std::vector<int32_t> ids = {1, 0, 0, 1, 1, 0, 1, 1};
  MoeLayout l = ComputeMoeLayoutRef(ids.data(), 4, 2, 3);
  EXPECT_EQ(l.offsets, (std::vector<int32_t>{0, 3, 8, 8}));
  EXPECT_EQ(l.row_to_slot, (std::vector<int32_t>{1, 2, 5, 0, 3, 4, 6, 7}));
  for (int s = 0; s < 8; ++s) EXPECT_EQ(l.row_to_slot[l.slot_to_row[s]], s);
}

TEST(MoeLayout, RejectsBadExpertIds) {
  const std::vector<int32_t> ids = {0, 3};
  EXPECT_THROW(ComputeMoeLayoutRef(ids.data(), 1, 2, 3), std::invalid_argument);
}

TEST(MoeLayout, PermuteCombineRoundTrip) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 0, 1};
  const int top_k = 2, tokens = 3, hidden = 4;
  MoeLayout l = ComputeMoeLayoutRef(ids.data(), tokens, top_k, 3);
  std::vector<float> x(tokens * hidden), perm(6 * hidden), slots(6 * hidden), out(tokens * hidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  PermuteRef(x.data(), l, top_k, hidden, perm.data());
  UnpermuteRef(perm.data(), l, hidden, slots.data());
  for (int s = 0; s < 6; ++s) {
    for (int h = 0; h < hidden; ++h) EXPECT_EQ(slots[s * hidden + h], x[(s / top_k) * hidden + h]);
  }
  // Gates summing to 1 per token give back x.
  const std::vector<float> gates = {0.25f, 0.75f, 0.5f, 0.5f, 1.0f, 0.0f};
  CombineRef(perm.data(), gates.data(), l, tokens, top_k, hidden, out.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(out[i], x[i]);
}

TEST(MoeLayout, CombineWithoutGatesSumsEachTokensRows) {
  const std::vector<int32_t> ids = {1, 1, 0, 1, 0, 0};  // token 0: both slots on expert 1
  const int top_k = 2, tokens = 3, hidden = 2;
  MoeLayout l = ComputeMoeLayoutRef(ids.data(), tokens, top_k, 2);
  std::vector<float> rows(6 * hidden), out(tokens * hidden);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(1 << i);
  CombineRef(rows.data(), nullptr, l, tokens, top_k, hidden, out.data());
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < hidden; ++h) {
      const float want = rows[l.slot_to_row[2 * t] * hidden + h] +
                         rows[l.slot_to_row[2 * t + 1] * hidden + h];
      EXPECT_EQ(out[t * hidden + h], want) << t << ", " << h;
    }
  }
}

// L = <grad_y, CombineRef(expert_out, gates)> is linear in expert_out and in
// gates, so its gradients dotted with the point give L back (Euler), and a
// step along one gate moves L by that gate's gradient.
TEST(MoeLayout, CombineBackwardIsTheGradientOfTheCombine) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  const int tokens = 5, top_k = 3, hidden = 6;
  std::vector<int32_t> ids(tokens * top_k);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 4);
  MoeLayout l = ComputeMoeLayoutRef(ids.data(), tokens, top_k, 4);
  const int slots = tokens * top_k;
  std::vector<float> eo(slots * hidden), gates(slots), gy(tokens * hidden);
  for (float& v : eo) v = dist(rng);
  for (float& v : gates) v = dist(rng);
  for (float& v : gy) v = dist(rng);
  auto loss = [&](const std::vector<float>& g) {
    std::vector<float> out(tokens * hidden);
    CombineRef(eo.data(), g.data(), l, tokens, top_k, hidden, out.data());
    double sum = 0.0;
    for (size_t i = 0; i < out.size(); ++i) sum += double(gy[i]) * out[i];
    return sum;
  };
  std::vector<float> grad_eo(slots * hidden), grad_gates(slots);
  CombineBackwardRef(gy.data(), eo.data(), gates.data(), l, top_k, hidden, grad_eo.data(),
                     grad_gates.data());
  const double l0 = loss(gates);
  double by_eo = 0.0, by_gates = 0.0;
  for (size_t i = 0; i < eo.size(); ++i) by_eo += double(grad_eo[i]) * eo[i];
  for (int s = 0; s < slots; ++s) by_gates += double(grad_gates[s]) * gates[s];
  EXPECT_NEAR(by_eo, l0, 1e-4 * (1 + std::fabs(l0)));
  EXPECT_NEAR(by_gates, l0, 1e-4 * (1 + std::fabs(l0)));
  for (int s = 0; s < slots; ++s) {
    std::vector<float> moved = gates;
    moved[s] += 1.0f;
    EXPECT_NEAR(loss(moved) - l0, grad_gates[s], 1e-4 * (1 + std::fabs(l0))) << "slot " << s;
  }
}

// The fp32 steps against silu(a) * b in double, and grad_a against a central
// difference of silu in double: checks the closed form s * (1 + a * (1 - s)),
// not only its restatement. The fp32 cancellation in 1 + a * (1 - s) costs
// up to ~1e-7 * (1 + |a|) of |grad_h * b|.
TEST(SwiGluRef, MatchesSiluAndItsDerivativeInDouble) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  const int n = 4096;
  std::vector<float> a(n), b(n), g(n), h(n), grad_a(n), grad_b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = RoundToBf16(dist(rng));
    b[i] = RoundToBf16(dist(rng) / 4);
    g[i] = RoundToBf16(dist(rng) / 4);
  }
  SwiGluForwardRef(a.data(), b.data(), n, h.data());
  SwiGluBackwardRef(g.data(), a.data(), b.data(), n, grad_a.data(), grad_b.data());
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  for (int i = 0; i < n; ++i) {
    const double x = a[i], eps = 1e-5;
    const double dsilu = (silu(x + eps) - silu(x - eps)) / (2 * eps);
    const double want_h = silu(x) * b[i], want_b = double(g[i]) * silu(x);
    const double want_a = double(g[i]) * b[i] * dsilu;
    EXPECT_NEAR(h[i], want_h, 1e-6 * std::fabs(want_h)) << "a = " << x;
    EXPECT_NEAR(grad_b[i], want_b, 1e-6 * std::fabs(want_b)) << "a = " << x;
    const double scale = std::fabs(double(g[i]) * b[i]);
    EXPECT_NEAR(grad_a[i], want_a, 1e-6 * (std::fabs(want_a) + scale * (1 + std::fabs(x))))
        << "a = " << x;
  }
}

// Where exp(-a) overflows (s = 0) or underflows (s = 1): no NaN, and the
// limits silu = 0, silu' = 0 and silu = a, silu' = 1.
TEST(SwiGluRef, LargeGatesTakeTheLimits) {
  for (float a : {-3.0e38f, -1e4f, -100.0f, -89.0f, 89.0f, 100.0f, 1e4f, 3.0e38f}) {
    const float b = 0.5f, g = -0.75f;
    float h, grad_a, grad_b;
    SwiGluForwardRef(&a, &b, 1, &h);
    SwiGluBackwardRef(&g, &a, &b, 1, &grad_a, &grad_b);
    SCOPED_TRACE(a);
    if (a < 0) {
      EXPECT_EQ(SigmoidRef(a), 0.0f);
      EXPECT_EQ(h, 0.0f);
      EXPECT_EQ(grad_a, 0.0f);
      EXPECT_EQ(grad_b, 0.0f);
    } else {
      EXPECT_EQ(SigmoidRef(a), 1.0f);
      EXPECT_EQ(h, a * b);
      EXPECT_EQ(grad_a, g * b);
      EXPECT_EQ(grad_b, g * a);
    }
  }
}

// The usual RoPE table, angle p * 10000^(-2i / head_dim), rounded to fp32.
void RopeTable(int64_t seq_len, int head_dim, std::vector<float>& cos, std::vector<float>& sin) {
  const int half = head_dim / 2;
  cos.resize(seq_len * half);
  sin.resize(seq_len * half);
  for (int64_t p = 0; p < seq_len; ++p) {
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / head_dim);
      cos[p * half + i] = static_cast<float>(std::cos(angle));
      sin[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

// A fresh generator per test, its seed printed; TRELLIS_TEST_SEED replays it.
std::mt19937 FreshRng() {
  const char* env = std::getenv("TRELLIS_TEST_SEED");
  const auto seed = env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                        : std::random_device{}();
  std::printf("TRELLIS_TEST_SEED=%u\n", seed);
  return std::mt19937(seed);
}

std::vector<float> RandomBf16Values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = RoundToBf16(dist(rng));
  return v;
}

// Against the rotation in double with the same fp32 cos and sin: two rounded
// products and a rounded sum are off by at most 2^-23 * (|a| + |b|) (times
// 1 + 2^-25, and double's own rounding: the 1e-6 below). Rows
// past seq_len wrap to position r % seq_len.
TEST(RopeRef, MatchesTheRotationInDouble) {
  std::mt19937 rng = FreshRng();
  const int64_t rows = 23, seq_len = 9;
  const int heads = 3, head_dim = 16, half = head_dim / 2;
  std::vector<float> cos, sin;
  RopeTable(seq_len, head_dim, cos, sin);
  const std::vector<float> x = RandomBf16Values(rng, rows * heads * head_dim);
  std::vector<float> out(x.size());
  for (bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    RopeRef(x.data(), heads * head_dim, rows, seq_len, heads, head_dim, cos.data(), sin.data(),
            inverse, out.data());
    const double sign = inverse ? -1.0 : 1.0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < half; ++i) {
          const int64_t at = (r * heads + h) * head_dim + i;
          const double x1 = x[at], x2 = x[at + half];
          const double c = cos[r % seq_len * half + i], s = sign * sin[r % seq_len * half + i];
          const double u = std::ldexp(1.0 + 1e-6, -23);
          EXPECT_NEAR(out[at], x1 * c - x2 * s, u * (std::fabs(x1 * c) + std::fabs(x2 * s)))
              << "row " << r << " head " << h << " i " << i;
          EXPECT_NEAR(out[at + half], x1 * s + x2 * c, u * (std::fabs(x1 * s) + std::fabs(x2 * c)))
              << "row " << r << " head " << h << " i " << i;
        }
      }
    }
  }
}

// Backward undoes forward up to fp32 rounding (cos^2 + sin^2 is 1 within a
// few fp32 ulp, and each pass rounds twice).
TEST(RopeRef, InverseOfForwardReturnsX) {
  std::mt19937 rng = FreshRng();
  const int64_t rows = 64, seq_len = 64;
  const int heads = 2, head_dim = 128, half = head_dim / 2;
  std::vector<float> cos, sin;
  RopeTable(seq_len, head_dim, cos, sin);
  const std::vector<float> x = RandomBf16Values(rng, rows * heads * head_dim);
  std::vector<float> y(x.size()), back(x.size());
  RopeRef(x.data(), heads * head_dim, rows, seq_len, heads, head_dim, cos.data(), sin.data(),
          false, y.data());
  RopeRef(y.data(), heads * head_dim, rows, seq_len, heads, head_dim, cos.data(), sin.data(),
          true, back.data());
  for (size_t at = 0; at < x.size(); ++at) {
    const size_t pair = at % head_dim < size_t{half} ? at + half : at - half;
    EXPECT_NEAR(back[at], x[at], 1e-6 * (std::fabs(x[at]) + std::fabs(x[pair]))) << at;
  }
}

// A row stride past heads * head_dim (q of a [q | k | v] row): the gaps, NaN
// here, are never read and the result is that of the packed rows.
TEST(RopeRef, StridedRowsSkipTheGaps) {
  std::mt19937 rng = FreshRng();
  const int64_t rows = 10, seq_len = 4, stride = 3 * 2 * 8 + 5;
  const int heads = 2, head_dim = 8, width = heads * head_dim;
  std::vector<float> cos, sin;
  RopeTable(seq_len, head_dim, cos, sin);
  const std::vector<float> packed = RandomBf16Values(rng, rows * width);
  std::vector<float> strided(rows * stride, NAN);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(packed.begin() + r * width, width, strided.begin() + r * stride);
  }
  for (bool inverse : {false, true}) {
    std::vector<float> want(packed.size()), got(packed.size());
    RopeRef(packed.data(), width, rows, seq_len, heads, head_dim, cos.data(), sin.data(), inverse,
            want.data());
    RopeRef(strided.data(), stride, rows, seq_len, heads, head_dim, cos.data(), sin.data(),
            inverse, got.data());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
  }
}

TEST(Accumulate, SumsEveryBuffer) {
  std::vector<float> acc = {1, 2}, recv = {10, 20, 100, 200, 1000, 2000};
  AccumulateRef(acc.data(), recv.data(), 3, 2);
  EXPECT_EQ(acc, (std::vector<float>{1111, 2222}));
}

TEST(TileMap, CoversEveryTileOnceWithEmptyExperts) {
  const std::vector<int32_t> offsets = {0, 0, 130, 130, 131, 500};  // experts 0 and 2 empty
  const int n = 200, bm = 128, bn = 64;
  std::vector<int> starts = GroupedTileStarts(offsets.data(), 5, n, bm, bn);
  const int n_tiles = CeilDiv(n, bn);
  EXPECT_EQ(starts.back(), (2 + 1 + 3) * n_tiles);
  std::set<std::tuple<int, int, int>> seen;
  for (int t = 0; t < starts.back(); ++t) {
    TileCoord c = TileAt(starts.data(), 5, n_tiles, t);
    const int rows = offsets[c.expert + 1] - offsets[c.expert];
    ASSERT_GT(rows, 0) << "tile " << t << " maps to an empty expert";
    ASSERT_LT(c.m_tile * bm, rows);
    ASSERT_LT(c.n_tile, n_tiles);
    EXPECT_TRUE(seen.insert({c.expert, c.m_tile, c.n_tile}).second);
  }
}

TEST(TileMap, StaticScheduleIsAPartition) {
  std::vector<int> count(1000, 0);
  for (int b = 0; b < 132; ++b) {
    for (int t : StaticTilesOfBlock(1000, 132, b)) ++count[t];
  }
  for (int c : count) EXPECT_EQ(c, 1);
}

TEST(GroupedGemmRef, MatchesPerExpertProducts) {
  const std::vector<int32_t> offsets = {0, 1, 1, 3};
  const int n = 2, k = 2;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> w = {1, 0, 0, 1, /*e1*/ 9, 9, 9, 9, /*e2*/ 1, 1, 2, -1};
  std::vector<float> out(6);
  GroupedGemmRef(x.data(), w.data(), offsets.data(), 3, n, k, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 2, 7, 2, 11, 4}));
}

TEST(NewtonSchulzRef, OrthogonalizesAndCommutesWithTranspose) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  const int m = 24, n = 40;
  std::vector<float> g(2 * m * n), gt(2 * m * n), o(2 * m * n), ot(2 * m * n);
  for (float& v : g) v = dist(rng);
  for (int b = 0; b < 2; ++b) {
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < n; ++c) gt[b * m * n + c * m + r] = g[b * m * n + r * n + c];
    }
  }
  NewtonSchulzRef(g.data(), 2, m, n, 5, o.data());
  NewtonSchulzRef(gt.data(), 2, n, m, 5, ot.data());
  for (int b = 0; b < 2; ++b) {
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < n; ++c) {
        ASSERT_EQ(o[b * m * n + r * n + c], ot[b * m * n + c * m + r]);
      }
    }
    // Rows come out near orthonormal (the quintic trades exactness for speed:
    // singular values land around [0.7, 1.2] once they have grown).
    double off = 0.0;
    for (int p = 0; p < m; ++p) {
      for (int q = 0; q < m; ++q) {
        double dot = 0.0;
        for (int c = 0; c < n; ++c) dot += double(o[b * m * n + p * n + c]) * o[b * m * n + q * n + c];
        off += (dot - (p == q)) * (dot - (p == q));
      }
    }
    EXPECT_LT(std::sqrt(off / m), 0.5);
  }
}

// Equal logits: the loss is log(vocab) and the softmax 1 / vocab; a shift of
// every logit changes neither; the gradient sums to 0 on every kept row.
TEST(CrossEntropyRef, KnownValuesAndShiftInvariance) {
  const int64_t vocab = 10;
  std::vector<float> x(3 * vocab, 2.5f);
  for (int64_t j = 0; j < vocab; ++j) x[vocab + j] = x[2 * vocab + j] = 0.1f * j;
  for (int64_t j = 0; j < vocab; ++j) x[2 * vocab + j] += 500.0f;
  const std::vector<int64_t> targets = {4, 9, 9};
  std::vector<double> loss(3), grad(3 * vocab);
  CrossEntropyRowsRef(x.data(), 3, vocab, targets.data(), loss.data(), grad.data());
  EXPECT_NEAR(loss[0], std::log(10.0), 1e-12);
  EXPECT_NEAR(grad[4], 0.1 - 1, 1e-12);
  EXPECT_NEAR(grad[0], 0.1, 1e-12);
  EXPECT_NEAR(loss[1], loss[2], 1e-4);  // fp32 logits near 500 carry ~3e-5 of rounding
  for (int r = 1; r < 3; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < vocab; ++j) sum += grad[r * vocab + j];
    EXPECT_NEAR(sum, 0.0, 1e-12);
  }
  const std::vector<int64_t> ignored = {-1, 10, -3};
  CrossEntropyRowsRef(x.data(), 3, vocab, ignored.data(), loss.data(), grad.data());
  EXPECT_EQ(loss[0], 0.0);
  EXPECT_TRUE(std::isnan(loss[1]) && std::isnan(loss[2]));
  for (double g : grad) EXPECT_EQ(g, 0.0);
}

}  // namespace
}  // namespace trellis::kernels::ref
