#include "kernels/grouped_gemm.h"

#include <chrono>
#include <numeric>

#include "kernels/ref/dense_ref.h"
#include "kernels/sm_occupier.h"
#include "kernels/test/test_util.h"

namespace trellis::kernels {
namespace {

using testing::AsBf16;
using testing::Bf16Bits;
using testing::DeviceBuffer;

struct Case {
  std::vector<int> rows; // per expert; -1: draw 0..300 at random
  int n, k;
};

struct Problem {
  std::vector<int32_t> offsets;
  testing::Bf16Data x, w;
  std::vector<float> want;
  int experts, n, k;
  int64_t total() const { return offsets.back(); }
};

Problem MakeProblem(std::mt19937_64 &rng, const Case &c) {
  Problem p;
  p.experts = static_cast<int>(c.rows.size());
  p.n = c.n;
  p.k = c.k;
  p.offsets.assign(1, 0);
  std::uniform_int_distribution<int> random_rows(0, 300);
  for (int r : c.rows)
    p.offsets.push_back(p.offsets.back() + (r < 0 ? random_rows(rng) : r));
  p.x = testing::RandomBf16(rng, p.total() * c.k);
  p.w = testing::RandomBf16(rng, static_cast<size_t>(p.experts) * c.n * c.k,
                            0.05f);
  p.want.resize(p.total() * c.n);
  ref::GroupedGemmRef(p.x.values.data(), p.w.values.data(), p.offsets.data(),
                      p.experts, c.n, c.k, p.want.data());
  return p;
}

const char *Name(TileSchedule s) {
  return s == TileSchedule::kStatic    ? "static"
         : s == TileSchedule::kDynamic ? "dynamic"
                                       : "per-tile";
}

const char *Name(GroupedGemmMainLoop m) {
  return m == GroupedGemmMainLoop::kWgmma      ? "wgmma"
         : m == GroupedGemmMainLoop::kWgmma128 ? "wgmma128"
         : m == GroupedGemmMainLoop::kMmaSync  ? "mma.sync"
                                               : "default";
}

constexpr GroupedGemmMainLoop kMainLoops[] = {
    GroupedGemmMainLoop::kDefault, GroupedGemmMainLoop::kWgmma,
    GroupedGemmMainLoop::kWgmma128, GroupedGemmMainLoop::kMmaSync};

class GroupedGemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedGemmTest, EveryMainLoopAndScheduleMatchesTheReference) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  const Problem p = MakeProblem(rng, GetParam());
  DeviceBuffer<Bf16Bits> d_x(p.x.bits), d_w(p.w.bits), d_out(p.total() * p.n);
  DeviceBuffer<int32_t> d_offsets(p.offsets);
  DeviceBuffer<unsigned char> d_ws(kGroupedGemmWorkspaceBytes);
  for (GroupedGemmMainLoop loop : kMainLoops) {
    for (TileSchedule s : {TileSchedule::kStatic, TileSchedule::kDynamic,
                           TileSchedule::kPerTile}) {
      for (int max_blocks : {0, 3}) { // 3: each block runs many tiles
        SCOPED_TRACE(std::string(Name(loop)) + " " + Name(s) +
                     " max_blocks=" + std::to_string(max_blocks));
        d_out.Poison();
        GroupedGemm(AsBf16(d_x), AsBf16(d_w), d_offsets.get(), p.experts,
                    p.total(), p.n, p.k, AsBf16(d_out), s, d_ws.get(), nullptr,
                    max_blocks, loop);
        testing::Sync();
        const std::vector<float> got = testing::Bf16ToFloats(d_out.Download());
        EXPECT_EQ(testing::CountNaN(got), 0u) << "outputs never written";
        // Products are exact in fp32 accumulation up to ordering; bf16 output
        // rounding dominates.
        EXPECT_LT(testing::RelError(got, p.want), 4e-3);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GroupedGemmTest,
    ::testing::Values(
        Case{{0, 1, 130, 257}, 136, 72}, // empty expert, ragged, odd tiles
        Case{{128, 0, 0}, 128, 32},      // one exact tile, trailing empties
        Case{{-1, -1, -1, -1, -1, -1, -1, -1}, 256, 512},
        Case{{0, 0, 0, 5}, 8, 8},               // tiny
        Case{{300, 0, 513, 129, 1}, 776, 1000}, // n, k past the 256 / 64 tiles
        Case{
            {200, 64, 300, 17, 0, 129, 90, 33, 250, 1, 128, 77, 0, 45, 300, 12},
            384,
            520}));

// Blocks that start late (40 SMs held) must not change the result.
TEST(GroupedGemm, DynamicIsCorrectWhileSmsAreHeld) {
  TRELLIS_SKIP_WITHOUT_GPU();
  auto rng = testing::TestRng();
  std::vector<int> rows(16);
  for (int &r : rows)
    r = -1;
  const Problem p = MakeProblem(rng, Case{rows, 256, 256});
  DeviceBuffer<Bf16Bits> d_x(p.x.bits), d_w(p.w.bits), d_out(p.total() * p.n);
  DeviceBuffer<int32_t> d_offsets(p.offsets);
  DeviceBuffer<unsigned char> d_ws(kGroupedGemmWorkspaceBytes);
  cudaStream_t side;
  TRELLIS_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  SmOccupier occupier;
  for (GroupedGemmMainLoop loop : kMainLoops) {
    for (TileSchedule s : {TileSchedule::kStatic, TileSchedule::kDynamic}) {
      SCOPED_TRACE(std::string(Name(loop)) + " " + Name(s));
      d_out.Poison();
      occupier.Hold(40, std::chrono::milliseconds(5), side);
      GroupedGemm(AsBf16(d_x), AsBf16(d_w), d_offsets.get(), p.experts,
                  p.total(), p.n, p.k, AsBf16(d_out), s, d_ws.get(), nullptr, 0,
                  loop);
      testing::Sync();
      const std::vector<float> got = testing::Bf16ToFloats(d_out.Download());
      EXPECT_EQ(testing::CountNaN(got), 0u);
      EXPECT_LT(testing::RelError(got, p.want), 4e-3);
    }
  }
  TRELLIS_CUDA_CHECK(cudaStreamDestroy(side));
}

TEST(GroupedGemm, RejectsBadSizes) {
  TRELLIS_SKIP_WITHOUT_GPU();
  DeviceBuffer<Bf16Bits> x(1024), w(1024), out(1024);
  DeviceBuffer<int32_t> offsets(2);
  EXPECT_THROW(GroupedGemm(AsBf16(x), AsBf16(w), offsets.get(), 1, 8, 12, 8,
                           AsBf16(out), TileSchedule::kStatic, nullptr,
                           nullptr),
               std::invalid_argument);
  EXPECT_THROW(GroupedGemm(AsBf16(x), AsBf16(w), offsets.get(), 1, 8, 8, 8,
                           AsBf16(out), TileSchedule::kDynamic, nullptr,
                           nullptr),
               std::invalid_argument);
}

} // namespace
} // namespace trellis::kernels
