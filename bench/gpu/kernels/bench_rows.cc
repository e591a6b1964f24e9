// The benchmark groups. Every row times our kernel and, where PyTorch has an
// expression for the same job, that expression, on the same inputs.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "bench/gpu/kernels/bench_timing.h"
#include "kernels/accumulate.h"
#include "kernels/fp8_blockwise.h"
#include "kernels/grouped_gemm.h"
#include "kernels/moe_permute.h"
#include "kernels/newton_schulz.h"
#include "kernels/sm_occupier.h"

namespace trellis::bench {
namespace {

namespace k = trellis::kernels;
constexpr int64_t kHidden = 2048, kExpertHidden = 768, kExperts = 64, kTopK = 8, kTokens = 16384;
constexpr int64_t kSlots = kTokens * kTopK;
constexpr int kHeldSms = 40;

torch::TensorOptions Cuda(torch::ScalarType t) { return torch::dtype(t).device(torch::kCUDA); }
__nv_bfloat16* Bf16(const torch::Tensor& t) {
  return reinterpret_cast<__nv_bfloat16*>(t.data_ptr());
}

double Gbps(double bytes, double ms) { return bytes / ms / 1e6; }

Row MemoryRow(const Peaks& p, std::string kernel, std::string variant, double ms, double bytes,
              double torch_ms, std::string note = "") {
  const double gbps = Gbps(bytes, ms);
  return {std::move(kernel), std::move(variant), ms, gbps, 0, gbps / p.copy_gbps,
          torch_ms > 0 ? torch_ms / ms : 0, std::move(note)};
}

// Random top-8 routing: each token picks 8 distinct experts uniformly.
torch::Tensor RandomTopK() {
  auto scores = torch::rand({kTokens, kExperts}, Cuda(torch::kFloat));
  return std::get<1>(scores.topk(kTopK, 1)).to(torch::kInt);
}

}  // namespace

void BenchFp8(const Peaks& p, std::vector<Row>& rows) {
  // One rank's expert weights at moe-bench size: 64 x 3 matrices of 768 x 2048.
  const int64_t n = kExperts * 3 * kExpertHidden * kHidden;
  auto x = torch::randn({n}, Cuda(torch::kBFloat16));
  auto q = torch::empty({n}, Cuda(torch::kUInt8));
  auto scales = torch::empty({n / 128}, Cuda(torch::kFloat));
  auto back = torch::empty({n}, Cuda(torch::kBFloat16));
  torch::Tensor pt_q, pt_scale, pt_back;
  const double pt_ms = MedianMs(
      [&] {
        auto blocks = x.view({-1, 128}).to(torch::kFloat);
        auto amax = blocks.abs().amax(1, true);
        pt_scale = amax / 448.0;
        pt_q = (blocks / pt_scale).to(torch::kFloat8_e4m3fn);
      },
      nullptr);
  const double ms = MedianMs(
      [&] { k::QuantizeFp8Blockwise(Bf16(x), n, q.data_ptr<uint8_t>(), scales.data_ptr<float>(), nullptr); },
      nullptr);
  const double bytes = n * 2.0 + n * 1.0 + n / 128 * 4.0;
  rows.push_back(MemoryRow(p, "fp8-quantize", "ours bf16->e4m3 (302M values)", ms, bytes, pt_ms,
                           "target >= 0.85 of copy bandwidth"));
  rows.push_back(MemoryRow(p, "fp8-quantize", "pytorch amax/scale/.to(e4m3fn)", pt_ms, bytes, 0));
  // Same codes as PyTorch's cast (both round to nearest even)?
  const double mismatch =
      (pt_q.view(torch::kUInt8).view({-1}) != q).to(torch::kDouble).mean().item<double>();
  std::printf("fp8: fraction of codes differing from PyTorch's cast: %.2e\n", mismatch);

  const double pt_dq_ms = MedianMs(
      [&] { pt_back = (pt_q.to(torch::kFloat) * pt_scale).to(torch::kBFloat16); }, nullptr);
  const double dq_ms = MedianMs(
      [&] { k::DequantizeFp8Blockwise(q.data_ptr<uint8_t>(), scales.data_ptr<float>(), n, Bf16(back), nullptr); },
      nullptr);
  rows.push_back(MemoryRow(p, "fp8-dequantize", "ours e4m3->bf16", dq_ms, bytes, pt_dq_ms));
  rows.push_back(MemoryRow(p, "fp8-dequantize", "pytorch .to(float)*scale", pt_dq_ms, bytes, 0));
}

void BenchAccumulate(const Peaks& p, std::vector<Row>& rows) {
  const int bufs = 8;
  const int64_t n = int64_t{32} << 20;
  auto acc = torch::randn({n}, Cuda(torch::kFloat));
  auto recv = torch::randn({bufs, n}, Cuda(torch::kBFloat16));
  const double pt_ms = MedianMs([&] { acc.add_(recv.to(torch::kFloat).sum(0)); }, nullptr);
  const double ms = MedianMs(
      [&] { k::AccumulateBf16(acc.data_ptr<float>(), Bf16(recv), bufs, n, n, nullptr); }, nullptr);
  const double bytes = n * 8.0 + bufs * n * 2.0;
  rows.push_back(MemoryRow(p, "bf16-accumulate", "ours 8 bufs x 32M", ms, bytes, pt_ms));
  rows.push_back(MemoryRow(p, "bf16-accumulate", "pytorch acc += recv.float().sum(0)", pt_ms, bytes, 0));
}

void BenchMoePermute(const Peaks& p, std::vector<Row>& rows) {
  auto ids = RandomTopK();
  auto offsets = torch::empty({kExperts + 1}, Cuda(torch::kInt));
  auto row_to_slot = torch::empty({kSlots}, Cuda(torch::kInt));
  auto slot_to_row = torch::empty({kSlots}, Cuda(torch::kInt));
  const size_t ws_bytes = k::MoeLayoutWorkspaceBytes(kSlots, kExperts);
  auto ws = torch::empty({static_cast<int64_t>(ws_bytes)}, Cuda(torch::kUInt8));
  auto layout = [&] {
    k::ComputeMoeLayout(ids.data_ptr<int>(), kTokens, kTopK, kExperts, offsets.data_ptr<int>(),
                        row_to_slot.data_ptr<int>(), slot_to_row.data_ptr<int>(), ws.data_ptr(),
                        ws_bytes, nullptr);
  };
  torch::Tensor pt_order, pt_counts;
  const double pt_layout_ms = MedianMs(
      [&] {
        pt_order = std::get<1>(torch::sort(ids.view({-1}), /*stable=*/true, 0, false));
        pt_counts = torch::bincount(ids.view({-1}), {}, kExperts).cumsum(0);
      },
      nullptr);
  const double layout_ms = MedianMs(layout, nullptr);
  rows.push_back({"moe-layout", "ours radix sort + invert", layout_ms, 0, 0, 0,
                  pt_layout_ms / layout_ms, "131072 slots, 64 experts"});
  rows.push_back({"moe-layout", "pytorch stable sort + bincount", pt_layout_ms, 0, 0, 0, 0, ""});
  std::printf("moe layout equals torch stable sort: %d\n",
              static_cast<int>(torch::equal(pt_order.to(torch::kInt), row_to_slot)));

  auto x = torch::randn({kTokens, kHidden}, Cuda(torch::kBFloat16));
  auto perm = torch::empty({kSlots, kHidden}, Cuda(torch::kBFloat16));
  auto token_of_row = torch::div(row_to_slot, kTopK, "floor").to(torch::kLong);
  torch::Tensor pt_perm;
  const double pt_perm_ms = MedianMs([&] { pt_perm = x.index_select(0, token_of_row); }, nullptr);
  const double perm_ms = MedianMs(
      [&] {
        k::MoePermute(Bf16(x), slot_to_row.data_ptr<int>(), kTokens, kTopK, kHidden, Bf16(perm),
                      nullptr);
      },
      nullptr);
  // The least traffic: each token read once, each dispatch row written once.
  const double perm_bytes = (kTokens + kSlots) * kHidden * 2.0;
  rows.push_back(
      MemoryRow(p, "moe-permute", "ours scatter tokens", perm_ms, perm_bytes, pt_perm_ms));
  rows.push_back(MemoryRow(p, "moe-permute", "pytorch index_select", pt_perm_ms, perm_bytes, 0));
  std::printf("moe permute equals index_select: %d\n",
              static_cast<int>(torch::equal(perm, pt_perm)));

  auto y = torch::randn({kSlots, kHidden}, Cuda(torch::kBFloat16));
  auto gates = torch::rand({kTokens, kTopK}, Cuda(torch::kFloat));
  auto out = torch::empty({kTokens, kHidden}, Cuda(torch::kBFloat16));
  auto gate_of_row = gates.view({-1}).index_select(0, row_to_slot.to(torch::kLong)).unsqueeze(1);
  torch::Tensor pt_out;
  const double pt_comb_ms = MedianMs(
      [&] {
        pt_out = torch::zeros({kTokens, kHidden}, Cuda(torch::kFloat))
                     .index_add_(0, token_of_row, y.to(torch::kFloat) * gate_of_row)
                     .to(torch::kBFloat16);
      },
      nullptr);
  const double comb_ms = MedianMs(
      [&] {
        k::MoeCombine(Bf16(y), gates.data_ptr<float>(), slot_to_row.data_ptr<int>(), kTokens, kTopK,
                      kHidden, Bf16(out), nullptr);
      },
      nullptr);
  const double comb_bytes = kSlots * kHidden * 2.0 + kTokens * kHidden * 2.0;
  rows.push_back(MemoryRow(p, "moe-combine", "ours gather per token, fp32 sum", comb_ms, comb_bytes,
                           pt_comb_ms));
  rows.push_back(MemoryRow(p, "moe-combine", "pytorch index_add_ (fp32)", pt_comb_ms, comb_bytes, 0));
  std::printf("moe combine rel diff vs pytorch: %.2e\n",
              ((out.to(torch::kFloat) - pt_out.to(torch::kFloat)).norm() / pt_out.to(torch::kFloat).norm())
                  .item<double>());
}

void BenchGroupedGemm(const Peaks& p, std::vector<Row>& rows) {
  auto ids = RandomTopK();
  auto counts = torch::bincount(ids.view({-1}).to(torch::kLong), {}, kExperts);
  auto offsets = torch::cat({torch::zeros({1}, counts.options()), counts.cumsum(0)}).to(torch::kInt);
  auto offs = offsets.slice(0, 1).contiguous();  // _grouped_mm's cumulative ends
  auto ws = torch::zeros({16}, Cuda(torch::kUInt8));
  cudaStream_t side;
  TRELLIS_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  k::SmOccupier occupier;

  struct Shape { const char* name; int64_t n, k; };
  for (const Shape& s : {Shape{"up 2048->768", kExpertHidden, kHidden},
                         Shape{"down 768->2048", kHidden, kExpertHidden}}) {
    auto x = torch::randn({kSlots, s.k}, Cuda(torch::kBFloat16));
    auto w = torch::randn({kExperts, s.n, s.k}, Cuda(torch::kBFloat16)) * 0.02;
    auto out = torch::empty({kSlots, s.n}, Cuda(torch::kBFloat16));
    const double flops = 2.0 * kSlots * s.n * s.k;
    auto run = [&](k::TileSchedule sched, k::GroupedGemmMainLoop loop) {
      return [&, sched, loop] {
        k::GroupedGemm(Bf16(x), Bf16(w), offsets.data_ptr<int>(), kExperts, kSlots, s.n, s.k,
                       Bf16(out), sched, ws.data_ptr(), nullptr, 0, loop);
      };
    };
    using k::GroupedGemmMainLoop;
    using k::TileSchedule;
    torch::Tensor pt_out;
    auto pt = [&] { pt_out = at::_grouped_mm(x, w.transpose(1, 2), offs); };
    pt();
    for (auto loop : {GroupedGemmMainLoop::kWgmma, GroupedGemmMainLoop::kWgmma128,
                      GroupedGemmMainLoop::kMmaSync}) {
      run(TileSchedule::kDynamic, loop)();
      TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
      const double diff = ((out.to(torch::kFloat) - pt_out.to(torch::kFloat)).norm() /
                           pt_out.to(torch::kFloat).norm()).item<double>();
      std::printf("grouped gemm %s main loop %d: rel diff vs at::_grouped_mm %.2e\n", s.name,
                  static_cast<int>(loop), diff);
    }

    struct Variant { const char* name; std::function<void()> fn; };
    const Variant variants[] = {
        {"at::_grouped_mm", pt},
        {"wgmma-static", run(TileSchedule::kStatic, GroupedGemmMainLoop::kWgmma)},
        {"wgmma-dynamic", run(TileSchedule::kDynamic, GroupedGemmMainLoop::kWgmma)},
        {"wgmma-per-tile", run(TileSchedule::kPerTile, GroupedGemmMainLoop::kWgmma)},
        {"wgmma128-static", run(TileSchedule::kStatic, GroupedGemmMainLoop::kWgmma128)},
        {"wgmma128-dynamic", run(TileSchedule::kDynamic, GroupedGemmMainLoop::kWgmma128)},
        {"mma.sync-static", run(TileSchedule::kStatic, GroupedGemmMainLoop::kMmaSync)},
        {"mma.sync-dynamic", run(TileSchedule::kDynamic, GroupedGemmMainLoop::kMmaSync)},
        {"mma.sync-per-tile", run(TileSchedule::kPerTile, GroupedGemmMainLoop::kMmaSync)}};
    // idle, then 40 SMs held for 0.5 ms / 1 ms from just before the GEMM starts
    for (int hold_us : {0, 500, 1000}) {
      double pt_ms = 0;
      for (const Variant& v : variants) {
        std::function<void()> before;
        if (hold_us > 0) {
          before = [&, hold_us] {
            TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
            occupier.Hold(kHeldSms, std::chrono::microseconds(hold_us), side);
          };
        }
        const double ms = MedianMs(v.fn, nullptr, 3, hold_us ? 15 : 20, before);
        if (pt_ms == 0) pt_ms = ms;
        const std::string variant = std::string(s.name) + " " + v.name +
                                    (hold_us ? " " + std::to_string(kHeldSms) + "SM-held-" +
                                                   std::to_string(hold_us) + "us"
                                             : " idle");
        const double tflops = flops / ms / 1e9;
        rows.push_back({"grouped-gemm", variant, ms, 0, tflops, tflops / p.matmul_tflops,
                        v.name == std::string("at::_grouped_mm") ? 0 : pt_ms / ms, ""});
      }
    }
  }
  TRELLIS_CUDA_CHECK(cudaStreamDestroy(side));
}

namespace {

// Muon's Newton-Schulz with at::matmul, one matrix (or a batch through bmm).
torch::Tensor TorchNewtonSchulz(torch::Tensor g) {
  const bool t = g.size(-2) > g.size(-1);
  auto x = (g / (g.norm(2, {-2, -1}, true) + 1e-7)).to(g.is_cuda() ? torch::kBFloat16 : torch::kFloat);
  if (t) x = x.transpose(-2, -1);
  for (int i = 0; i < 5; ++i) {
    auto a = torch::matmul(x, x.transpose(-2, -1));
    auto b = -4.7750 * a + 2.0315 * torch::matmul(a, a);
    x = 3.4445 * x + torch::matmul(b, x);
  }
  if (t) x = x.transpose(-2, -1);
  return x.to(torch::kFloat);
}

}  // namespace

void BenchNewtonSchulz(const Peaks& p, std::vector<Row>& rows) {
  for (auto [m, n] : {std::pair<int, int>{kExpertHidden, kHidden}, {kHidden, kExpertHidden}}) {
    const int batch = kExperts;
    auto g = torch::randn({batch, m, n}, Cuda(torch::kFloat));
    auto out = torch::empty_like(g);
    k::BatchedNewtonSchulz ns(batch, m, n);
    const double flops = ns.Flops();
    const std::string shape = std::to_string(batch) + "x[" + std::to_string(m) + "," + std::to_string(n) + "]";
    torch::Tensor pt_out;
    const double pt_loop_ms = MedianMs(
        [&] { for (int e = 0; e < batch; ++e) pt_out = TorchNewtonSchulz(g[e]); }, nullptr, 2, 5);
    const double pt_bmm_ms = MedianMs([&] { pt_out = TorchNewtonSchulz(g); }, nullptr, 2, 10);
    const double ms = MedianMs([&] { ns.Run(g.data_ptr<float>(), out.data_ptr<float>(), nullptr); }, nullptr, 2, 10);
    std::printf("newton-schulz %s: fused fp32 output %d\n", shape.c_str(),
                static_cast<int>(ns.FusedOutput()));
    std::printf("newton-schulz %s: rel diff vs torch batched %.2e\n", shape.c_str(),
                ((out - pt_out).norm() / pt_out.norm()).item<double>());
    auto row = [&](const std::string& v, double t, double vs, const std::string& note) {
      const double tf = flops / t / 1e9;
      rows.push_back({"newton-schulz", shape + " " + v, t, 0, tf, tf / p.matmul_tflops, vs, note});
    };
    row("ours batched cuBLASLt", ms, pt_loop_ms / ms, "target >= 0.75 of matmul peak; vs = loop");
    // The same call without iterations: norm, bf16 conversion, transposes, and an fp32
    // conversion pass out that the 5-step call no longer runs (its last product writes fp32),
    // so "products only" below is a lower bound of the products' time.
    const double io_ms = MedianMs([&] { ns.Run(g.data_ptr<float>(), out.data_ptr<float>(), nullptr, 0); },
                                  nullptr, 2, 10);
    row("ours products only (total - steps=0 run)", ms - io_ms, pt_loop_ms / ms,
        "steps=0 run took " + std::to_string(io_ms) + " ms");
    row("pytorch loop of at::matmul", pt_loop_ms, 0, "");
    row("pytorch batched matmul", pt_bmm_ms, 0, "");
    // The CPU, fp32, one matrix (all cores), scaled to the batch.
    auto g_cpu = g[0].cpu();
    const auto t0 = std::chrono::steady_clock::now();
    auto cpu_out = TorchNewtonSchulz(g_cpu);
    const double cpu_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() * batch;
    row("cpu fp32 at::matmul x" + std::to_string(batch) + " (" + std::to_string(at::get_num_threads()) +
            " threads)", cpu_ms, 0, "one matrix timed, times the batch");
  }
}

}  // namespace trellis::bench
