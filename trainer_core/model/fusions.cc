#include "trainer_core/model/fusions.h"

#include <cstdlib>
#include <utility>

#include "trainer_core/error.h"

namespace trellis::train {
namespace {

constexpr std::pair<const char*, bool Fusions::*> kFusions[] = {
    {"moe_kernels", &Fusions::moe_kernels},
    {"chunked_ce", &Fusions::chunked_ce},
    {"bf16_weights", &Fusions::bf16_weights},
    {"muon_update", &Fusions::muon_update},
    {"swiglu", &Fusions::swiglu},
    {"rope", &Fusions::rope},
    {"sdpa_gqa", &Fusions::sdpa_gqa},
    {"gate_up_gemm", &Fusions::gate_up_gemm},
    {"ce_kernel", &Fusions::ce_kernel},
    {"expert_wgrad", &Fusions::expert_wgrad},
    {"rms_norm", &Fusions::rms_norm},
    {"cross_layer_norm", &Fusions::cross_layer_norm},
    {"qkv_dgrad_sum", &Fusions::qkv_dgrad_sum},
    {"clip_in_momentum", &Fusions::clip_in_momentum},
    {"ns_apply", &Fusions::ns_apply},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Fusions ParseFusionsOff(std::string_view off) {
  Fusions f;
  while (!off.empty()) {
    const size_t comma = off.find(',');
    std::string_view name = Trim(off.substr(0, comma));
    off = comma == std::string_view::npos ? std::string_view() : off.substr(comma + 1);
    if (name.empty()) continue;
    bool known = false;
    for (const auto& [fusion, member] : kFusions) {
      if (name == "all" || name == fusion) {
        f.*member = false;
        known = true;
      }
    }
    if (!known) {
      std::string accepted = "all";
      for (const auto& [fusion, member] : kFusions) accepted += std::string(", ") + fusion;
      throw TrainError("TRELLIS_FUSIONS_OFF: unknown fusion '" + std::string(name) +
                       "' (accepted: " + accepted + ")");
    }
  }
  return f;
}

std::string DescribeFusionsOff(const Fusions& f) {
  std::string out;
  for (const auto& [fusion, member] : kFusions)
    if (!(f.*member)) out += (out.empty() ? "" : ",") + std::string(fusion);
  return out;
}

const Fusions& ActiveFusions() {
  static const Fusions fusions = [] {
    const char* v = std::getenv("TRELLIS_FUSIONS_OFF");
    return ParseFusionsOff(v == nullptr ? "" : v);
  }();
  return fusions;
}

}  // namespace trellis::train
