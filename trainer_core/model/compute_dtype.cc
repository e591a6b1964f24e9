#include "trainer_core/model/compute_dtype.h"

#include <fstream>
#include <sstream>

namespace trellis::train {

std::string CpuBf16Flag(const CpuFlags& flags) {
  for (const char* flag : {"amx_bf16", "avx512_bf16"})
    if (flags.count(flag) > 0) return flag;
  return "";
}

ComputeDtypeChoice ChooseComputeDtype(std::string_view spec_dtype, bool on_cuda,
                                      const CpuFlags& cpu) {
  if (spec_dtype == "bfloat16") return {ComputeDtype::kBFloat16, ""};
  if (spec_dtype != "auto") return {ComputeDtype::kFloat32, ""};
  if (on_cuda) return {ComputeDtype::kBFloat16, "auto: CUDA"};
  const std::string flag = CpuBf16Flag(cpu);
  if (!flag.empty()) return {ComputeDtype::kBFloat16, "auto: the CPU has " + flag};
  return {ComputeDtype::kFloat32, "auto: the CPU has no bf16 instructions"};
}

ComputeDtypeChoice ChooseComputeDtype(std::string_view spec_dtype, bool on_cuda) {
  return ChooseComputeDtype(spec_dtype, on_cuda, HostCpuFlags());
}

const char* ComputeDtypeName(ComputeDtype dtype) {
  return dtype == ComputeDtype::kBFloat16 ? "bfloat16" : "float32";
}

std::string DescribeComputeDtype(const ComputeDtypeChoice& choice) {
  std::string out = ComputeDtypeName(choice.dtype);
  if (!choice.why.empty()) out += " (" + choice.why + ")";
  return out;
}

CpuFlags ParseCpuFlags(std::string_view cpuinfo) {
  CpuFlags flags;
  while (!cpuinfo.empty()) {
    const size_t eol = cpuinfo.find('\n');
    std::string_view line = cpuinfo.substr(0, eol);
    cpuinfo = eol == std::string_view::npos ? std::string_view() : cpuinfo.substr(eol + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
    if (key != "flags") continue;
    std::istringstream words{std::string(line.substr(colon + 1))};
    for (std::string w; words >> w;) flags.insert(w);
    break;  // every CPU of a machine lists the same flags
  }
  return flags;
}

const CpuFlags& HostCpuFlags() {
  static const CpuFlags* flags = [] {
    std::ifstream in("/proc/cpuinfo");
    std::stringstream text;
    text << in.rdbuf();
    return new CpuFlags(ParseCpuFlags(text.str()));
  }();
  return *flags;
}

}  // namespace trellis::train
