#pragma once
// training.dtype = "auto": the matmul dtype chosen from what the hardware does
// fast. GPUs run bf16 natively. On a CPU, LibTorch 1.13 sends bf16 matmuls to
// oneDNN where the CPU has AVX-512, which runs them natively only with bf16
// instructions (AVX512_BF16, AMX-BF16) and emulates them otherwise; without
// AVX-512 it falls back to its own scalar bf16 GEMM. fp32 matmuls go to
// OpenBLAS. So "auto" is bf16 on CUDA and on CPUs with those instructions,
// else float32 (bench/results/trainer-cpu-2026-11-30.md has the figures).
// Only x86 flags are read: bf16 on other CPUs is not measured, so they get
// float32.
// Torch-free; the trainer maps the result to a torch dtype.

#include <set>
#include <string>
#include <string_view>

namespace trellis::train {

enum class ComputeDtype { kFloat32, kBFloat16 };

// A CPU's feature flags, as named in /proc/cpuinfo ("avx512_bf16", "amx_bf16").
using CpuFlags = std::set<std::string, std::less<>>;

// The flag that gives this CPU native bf16 matmuls in oneDNN (AMX first, the
// faster one), or empty when it has none.
std::string CpuBf16Flag(const CpuFlags& flags);

struct ComputeDtypeChoice {
  ComputeDtype dtype = ComputeDtype::kFloat32;
  std::string why;  // "auto: the CPU has avx512_bf16"; empty when the spec named the dtype
  bool bf16() const { return dtype == ComputeDtype::kBFloat16; }
};

// `spec_dtype` is training.dtype ("auto", "float32" or "bfloat16", already
// validated); `on_cuda` is the resolved device.
ComputeDtypeChoice ChooseComputeDtype(std::string_view spec_dtype, bool on_cuda,
                                      const CpuFlags& cpu);
// The same on this machine's CPU flags.
ComputeDtypeChoice ChooseComputeDtype(std::string_view spec_dtype, bool on_cuda);

// "float32" / "bfloat16", and with the reason where "auto" chose it:
// "bfloat16 (auto: the CPU has avx512_bf16)".
const char* ComputeDtypeName(ComputeDtype dtype);
std::string DescribeComputeDtype(const ComputeDtypeChoice& choice);

// The words of the first "flags" line of /proc/cpuinfo text (x86); empty
// when there is none (other architectures name theirs "Features").
CpuFlags ParseCpuFlags(std::string_view cpuinfo);
// This machine's flags: /proc/cpuinfo read once; empty where unreadable.
const CpuFlags& HostCpuFlags();

}  // namespace trellis::train
