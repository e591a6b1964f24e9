#pragma once
// The names of the failure markers a worker finds in a failed rank's log tail
// (worker/core/failure_markers.h says which text sets each), in the order it
// reports them. The controller accepts these and no others in a rank's exit
// (controller/rpc/validate.cc) and classifies launches by them
// (controller/core/failure_class.h).

#include <array>
#include <string_view>

namespace trellis {

inline constexpr std::array<std::string_view, 7> kFailureMarkerNames = {
    "device_oom",   "host_oom", "nccl_error",        "nccl_timeout",
    "device_error", "network",  "damaged_checkpoint"};

}  // namespace trellis
