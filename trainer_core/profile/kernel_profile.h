#pragma once
// The CUDA kernels of a few of trellis-train's steps, summed by name, for the
// step breakdown by kernel that bench/gpu/run.sh (PROFILE=1) prints beside
// PyTorch's. Built only with -DTRELLIS_KERNEL_PROFILE=ON (the bench turns it
// on); otherwise FromEnv() refuses the variables, so that a profile asked for
// is never silently missing.
//
//   TRELLIS_PROFILE_STEPS=FIRST:COUNT   steps FIRST .. FIRST+COUNT-1 (FIRST >= 2)
//   TRELLIS_PROFILE_OUT=FILE            "<total us>\t<calls>\t<kernel>" per line,
//                                       and FILE.timeline.txt: the device's busy
//                                       and idle time (timeline.h)
//   TRELLIS_PROFILE_HOST=1              also FILE.long.txt: the host calls and
//                                       device copies of 1 ms or more
//                                       (long_spans.h; records every ATen op)

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer_core/profile/long_spans.h"
#include "trainer_core/profile/timeline.h"

namespace trellis::train {

class KernelProfile {
 public:
  // nullptr when TRELLIS_PROFILE_STEPS is unset; throws TrainError naming the
  // variable and what is accepted when it is malformed.
  static std::unique_ptr<KernelProfile> FromEnv();
  // Call after each step (its 1-based number): the profile starts after step
  // FIRST-1 and is written after step FIRST+COUNT-1.
  void AfterStep(int64_t step);

 private:
  KernelProfile(int64_t first, int64_t count, std::string out, bool host)
      : first_(first), count_(count), out_(std::move(out)), host_(host) {}
  void WriteTimeline(const std::vector<DeviceSpan>& spans) const;
  void WriteLongSpans(const std::vector<HostSpan>& host,
                      const std::vector<DeviceSpan>& device) const;
  int64_t first_, count_;
  std::string out_;
  bool host_;
};

}  // namespace trellis::train
