// Expert blocks gathered over real processes (gloo on 127.0.0.1) in fp32,
// bf16 and FP8: every rank gets the same block, equal to each shard's own
// round trip through the format (so the model is the same on every rank),
// within the format's error of the fp32 weights.
#include "trainer_core/parallel/expert_gather.h"

#include <gtest/gtest.h>

#include <random>

#include "kernels/ref/fp8_e4m3.h"
#include "trainer_core/parallel/local_ranks_test_util.h"
#include "trainer_core/parallel/multiprocess.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {
namespace {

using testing::Failures;
using testing::FreePort;
using testing::RunRanks;
using namespace std::chrono_literals;

// Rank r's shard, reproducible from (seed, r): weights of varied scale per
// 128-value block, as trained experts have.
torch::Tensor Shard(uint64_t seed, int rank, int64_t n) {
  torch::manual_seed(static_cast<int64_t>(seed) + rank);
  auto x = torch::randn({n});
  auto block_scale = torch::rand({(n + 127) / 128}).mul(4).exp().repeat_interleave(128);
  return (x * block_scale.narrow(0, 0, n) * 0.02).contiguous();
}

torch::Tensor Fp8RoundTripRef(const torch::Tensor& x) {
  const int64_t n = x.numel();
  std::vector<uint8_t> q(n);
  std::vector<float> s(kernels::ref::Fp8NumBlocks(n));
  auto out = torch::empty({n});
  kernels::ref::QuantizeFp8BlockwiseRef(x.data_ptr<float>(), n, q.data(), s.data());
  kernels::ref::DequantizeFp8BlockwiseRef(q.data(), s.data(), n, out.data_ptr<float>());
  return out;
}

TEST(ExpertGatherTest, FormatsMatchTheirRoundTripOnEveryRank) {
  if (!CpuRanksCanMeet()) GTEST_SKIP() << "this LibTorch has no gloo: CPU ranks cannot meet";
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const int world = 3, port = FreePort();
  // 1000 values per shard: not a multiple of 128, so each shard ends in a
  // partial block; 1024: whole blocks, one dequantize pass.
  auto outcomes = RunRanks(world, 60s, [&](int rank) -> std::string {
    auto comm = testing::ConnectLocalRank(rank, world, port, 30s);
    for (int64_t n : {1000, 1024}) {
      std::vector<torch::Tensor> shards;
      for (int r = 0; r < world; ++r) shards.push_back(Shard(seed, r, n));
      auto exact = torch::cat(shards);
      if (!torch::equal(GatherExperts(*comm, shards[rank], ExpertGather::kFp32), exact))
        return "fp32 gather is not exact";
      auto bf16 = GatherExperts(*comm, shards[rank], ExpertGather::kBf16);
      if (!torch::equal(bf16, exact.to(torch::kBFloat16).to(torch::kFloat)))
        return "bf16 gather is not the bf16 rounding of the shards";
      auto fp8 = GatherExperts(*comm, shards[rank], ExpertGather::kFp8);
      std::vector<torch::Tensor> want;
      for (auto& s : shards) want.push_back(Fp8RoundTripRef(s));
      if (!torch::equal(fp8, torch::cat(want))) return "fp8 gather differs from the reference";
      // E4M3 keeps 3 mantissa bits: each value within 1/16 of its block's max.
      auto err = (fp8 - exact).abs().view({-1});
      auto rel = (err.norm() / exact.norm()).item<double>();
      if (rel > 0.05 || rel == 0) return "fp8 relative error " + std::to_string(rel);
    }
    comm->Barrier();
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

// On CUDA the codec is kernels/' (where linked): bit for bit the reference's.
TEST(ExpertGatherTest, CudaRoundTripMatchesTheCpuReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  for (int64_t n : {1, 127, 1000, 1 << 20}) {
    auto x = Shard(seed, 0, n);
    torch::Tensor codes, scales;
    QuantizeFp8(x.cuda(), &codes, &scales);
    ASSERT_TRUE(codes.is_cuda());
    auto back = DequantizeFp8(codes, scales).cpu();
    EXPECT_TRUE(torch::equal(back, Fp8RoundTripRef(x))) << "n = " << n;
  }
}

TEST(ExpertGatherTest, UnknownFormatIsNamed) {
  try {
    ParseExpertGather("e5m2");
    FAIL() << "accepted e5m2";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("float32, bfloat16 or fp8, got \"e5m2\""),
              std::string::npos);
  }
}

}  // namespace
}  // namespace trellis::train
