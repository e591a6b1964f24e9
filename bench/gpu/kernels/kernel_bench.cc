// trellis-kernel-bench: measures the two ceilings (device copy bandwidth, bf16
// matmul peak), then every kernel family against PyTorch on moe-bench shapes
// (hidden 2048, expert hidden 768, 64 experts, top-8, 16384 tokens). Prints a
// table and writes JSON rows to the file named by --json.
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "bench/gpu/kernels/bench_timing.h"

namespace trellis::bench {
namespace {

Peaks MeasurePeaks(std::vector<Row>& rows) {
  Peaks peaks;
  const int64_t bytes = int64_t{4} << 30;  // 4 GiB each way
  auto src = torch::randint(0, 255, {bytes}, torch::dtype(torch::kUInt8).device(torch::kCUDA));
  auto dst = torch::empty_like(src);
  const double copy_ms = MedianMs(
      [&] {
        TRELLIS_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes,
                                           cudaMemcpyDeviceToDevice, nullptr));
      },
      nullptr, 2, 10);
  peaks.copy_gbps = 2.0 * bytes / copy_ms / 1e6;
  rows.push_back({"ceiling", "device-copy", copy_ms, peaks.copy_gbps, 0, 1, 0,
                  "cudaMemcpy D2D 4 GiB, read + written"});
  src = dst = torch::Tensor();

  auto opts = torch::dtype(torch::kBFloat16).device(torch::kCUDA);
  auto a = torch::randn({8192, 8192}, opts), b = torch::randn({8192, 8192}, opts);
  torch::Tensor c;
  const double mm_ms = MedianMs([&] { c = torch::matmul(a, b); }, nullptr, 3, 20);
  peaks.matmul_tflops = 2.0 * 8192.0 * 8192.0 * 8192.0 / mm_ms / 1e9;
  rows.push_back({"ceiling", "bf16-matmul-8192", mm_ms, 0, peaks.matmul_tflops, 1, 0,
                  "at::matmul on random data"});
  return peaks;
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n%-16s %-34s %9s %9s %9s %7s %7s\n", "kernel", "variant", "ms", "GB/s", "TFLOP/s",
              "peak", "vs_pt");
  for (const Row& r : rows) {
    std::printf("%-16s %-34s %9.4f %9.1f %9.1f %7.3f %7.3f\n", r.kernel.c_str(),
                r.variant.c_str(), r.ms, r.gbps, r.tflops, r.fraction_of_peak,
                r.ratio_vs_pytorch);
  }
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

void WriteJson(const std::vector<Row>& rows, const Peaks& peaks, const std::string& path) {
  std::ofstream f(path);
  cudaDeviceProp prop{};
  TRELLIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  f << "{\"device\": \"" << Escape(prop.name) << "\", \"sms\": " << prop.multiProcessorCount
    << ", \"copy_gbps\": " << peaks.copy_gbps << ", \"matmul_tflops\": " << peaks.matmul_tflops
    << ",\n \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << "  {\"kernel\": \"" << Escape(r.kernel) << "\", \"variant\": \"" << Escape(r.variant)
      << "\", \"ms\": " << r.ms << ", \"gbps\": " << r.gbps << ", \"tflops\": " << r.tflops
      << ", \"fraction_of_peak\": " << r.fraction_of_peak
      << ", \"ratio_vs_pytorch\": " << r.ratio_vs_pytorch << ", \"note\": \"" << Escape(r.note)
      << "\"}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  f << " ]}\n";
}

}  // namespace
}  // namespace trellis::bench

int main(int argc, char** argv) {
  using namespace trellis::bench;
  std::string json_path = "kernel-bench.json", only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--only fp8|acc|moe|gemm|ns]\n", argv[0]);
      return 2;
    }
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "trellis-kernel-bench: no CUDA device\n");
    return 1;
  }
  std::vector<Row> rows;
  try {
    const Peaks peaks = MeasurePeaks(rows);
    const std::pair<const char*, void (*)(const Peaks&, std::vector<Row>&)> groups[] = {
        {"fp8", BenchFp8},   {"acc", BenchAccumulate},    {"moe", BenchMoePermute},
        {"gemm", BenchGroupedGemm}, {"ns", BenchNewtonSchulz}};
    for (const auto& [name, fn] : groups) {
      if (!only.empty() && only != name) continue;
      try {
        fn(peaks, rows);
      } catch (const std::exception& e) {  // one group failing still reports the others
        std::fprintf(stderr, "bench group %s failed: %s\n", name, e.what());
        rows.push_back({name, "FAILED", 0, 0, 0, 0, 0, e.what()});
      }
      std::fflush(stdout);
    }
    WriteJson(rows, peaks, json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trellis-kernel-bench: %s\n", e.what());
    PrintTable(rows);
    return 1;
  }
  PrintTable(rows);
  return 0;
}
