#include "kernels/expert_wgrad.h"

#include <cmath>

#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

struct Case {
  int experts;
  int64_t m, n;
  int parts;
  int64_t max_rows;
  bool overwrite;
  int64_t pad;  // extra columns in dy and x, and a gap after each expert's C
};

class ExpertWgradTest : public ::testing::TestWithParam<Case> {};

// Every C against an fp64 sum over the expert's rows; the gaps between C's
// keep their poison (NaN). bf16 output would miss the tolerance by far (its
// rounding is 2^-9 of the value; fp32 accumulation stays near 2^-24 per term).
TEST_P(ExpertWgradTest, SumsEachExpertsRowsIntoFp32LikeTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Case c = GetParam();
  std::vector<int64_t> rows(c.experts);
  std::uniform_int_distribution<int64_t> count(0, c.max_rows);
  int64_t total = 0;
  for (int g = 0; g < c.experts; ++g) {
    // Empty experts among them, alone and in runs of neighbours (zeroed a
    // run at a time when overwriting).
    rows[g] = g % 3 == 1 || (g >= 2 && g < 5) ? 0 : count(rng);
    total += rows[g];
  }
  const int64_t ld_dy = c.parts * c.m + c.pad, ld_x = c.n + c.pad;
  const int64_t expert_stride = c.m * c.n + c.pad, part_stride = c.experts * expert_stride;
  const testing::Bf16Data dy = testing::RandomBf16(rng, total * ld_dy);
  const testing::Bf16Data x = testing::RandomBf16(rng, total * ld_x);
  std::vector<float> acc(c.parts * part_stride, std::nanf(""));
  std::normal_distribution<float> init(0.0f, 8.0f);
  std::vector<double> want(acc.size()), scale(acc.size());
  int64_t first = 0;
  for (int g = 0; g < c.experts; ++g) {
    for (int p = 0; p < c.parts; ++p) {
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          const int64_t at = p * part_stride + g * expert_stride + i * c.n + j;
          acc[at] = init(rng);
          double sum = c.overwrite ? 0.0 : acc[at], abs = std::fabs(sum);
          for (int64_t r = first; r < first + rows[g]; ++r) {
            const double t = double(dy.values[r * ld_dy + p * c.m + i]) * x.values[r * ld_x + j];
            sum += t;
            abs += std::fabs(t);
          }
          want[at] = sum;
          scale[at] = abs;
        }
      }
    }
    first += rows[g];
  }

  DeviceBuffer<float> d_acc(acc);
  DeviceBuffer<Bf16Bits> d_dy(dy.bits), d_x(x.bits);
  ExpertWgrad args;
  args.dy = AsBf16(d_dy), args.ld_dy = ld_dy, args.x = AsBf16(d_x), args.ld_x = ld_x;
  args.rows = rows.data(), args.experts = c.experts, args.m = c.m, args.n = c.n;
  args.parts = c.parts, args.acc = d_acc.get();
  args.expert_stride = expert_stride, args.part_stride = part_stride;
  args.overwrite = c.overwrite;
  ExpertWgradFp32(args, nullptr);
  testing::Sync();
  const std::vector<float> got = d_acc.Download();
  int64_t bad = 0, gaps = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(acc[i])) {  // a gap: never written
      gaps += !std::isnan(got[i]);
      continue;
    }
    const double tol = 1e-5 * scale[i] + 1e-30;
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (++bad <= 5)
        ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i]
                      << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(gaps, 0) << "elements between the outputs were written";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ExpertWgradTest,
    ::testing::Values(Case{1, 8, 8, 1, 16, false, 0}, Case{5, 24, 40, 1, 70, true, 0},
                      Case{5, 24, 40, 1, 70, false, 0}, Case{7, 48, 32, 2, 90, false, 0},
                      Case{7, 48, 32, 2, 90, true, 0}, Case{6, 17, 23, 2, 33, false, 3},
                      Case{6, 17, 23, 2, 33, true, 3}, Case{4, 96, 64, 2, 300, false, 8},
                      Case{9, 64, 96, 1, 200, true, 5}, Case{2, 8, 8, 2, 40, true, 2}));

TEST(ExpertWgrad, EmptyRunsAreTheNeighbouringExpertsWithNoRows) {
  using Runs = std::vector<std::pair<int, int>>;
  const std::vector<int64_t> rows = {0, 0, 5, 0, 7, 1, 0, 0, 0};
  EXPECT_EQ(EmptyRuns(rows.data(), 9), (Runs{{0, 2}, {3, 4}, {6, 9}}));
  EXPECT_EQ(EmptyRuns(rows.data(), 3), (Runs{{0, 2}}));
  EXPECT_EQ(EmptyRuns(rows.data() + 4, 2), Runs{});
  EXPECT_EQ(EmptyRuns(nullptr, 0), Runs{});
}

TEST(ExpertWgrad, NoExpertsOrNoRowsIsNothing) {
  TRELLIS_SKIP_WITHOUT_GPU();
  ExpertWgrad args;  // zero experts
  ExpertWgradFp32(args, nullptr);
  std::vector<float> acc(16, 3.0f);
  DeviceBuffer<float> d_acc(acc);
  const std::vector<int64_t> rows = {0, 0};
  DeviceBuffer<Bf16Bits> one(8);
  args.dy = AsBf16(one), args.x = AsBf16(one), args.ld_dy = 2, args.ld_x = 4;
  args.rows = rows.data(), args.experts = 2, args.m = 2, args.n = 4, args.acc = d_acc.get();
  args.expert_stride = 8;
  ExpertWgradFp32(args, nullptr);  // adds nothing
  EXPECT_EQ(d_acc.Download(), acc);
  args.overwrite = true;  // an empty expert's gradient is zero
  ExpertWgradFp32(args, nullptr);
  EXPECT_EQ(d_acc.Download(), std::vector<float>(16, 0.0f));
}

TEST(ExpertWgrad, RejectsBadArguments) {
  const std::vector<int64_t> rows = {2, 3};
  auto valid = [&] {
    ExpertWgrad a;
    a.dy = a.x = reinterpret_cast<const __nv_bfloat16*>(16);
    a.acc = reinterpret_cast<float*>(16);
    a.rows = rows.data(), a.experts = 2, a.m = 4, a.n = 8, a.parts = 2;
    a.ld_dy = 8, a.ld_x = 8, a.expert_stride = 32, a.part_stride = 64;
    return a;
  };
  auto expect = [](ExpertWgrad a, const std::string& what) {
    testing::ExpectInvalid([&] { ExpertWgradFp32(a, nullptr); }, what);
  };
  ExpertWgrad a = valid();
  a.ld_dy = 7;
  expect(a, "ld_dy must be >= parts * m (8), got 7");
  a = valid(), a.ld_x = 4;
  expect(a, "ld_x must be >= n (8)");
  a = valid(), a.parts = 0;
  expect(a, "parts must be >= 1");
  a = valid(), a.part_stride = 32;  // part 1 of expert 0 lands on expert 1
  expect(a, "outputs overlap");
  a = valid(), a.rows = nullptr;
  expect(a, "rows (host counts per expert) missing");
  const std::vector<int64_t> negative = {2, -1};
  a = valid(), a.rows = negative.data();
  expect(a, "rows[1] must be in [0, INT_MAX]");
  a = valid(), a.acc = nullptr;
  expect(a, "acc, dy and x are required");
}

}  // namespace
}  // namespace trellis::kernels
