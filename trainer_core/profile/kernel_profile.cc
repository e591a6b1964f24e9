#include "trainer_core/profile/kernel_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "trainer_core/error.h"
#include "trainer_core/profile/long_spans.h"

#ifdef TRELLIS_KERNEL_PROFILE
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

namespace trellis::train {

#ifdef TRELLIS_KERNEL_PROFILE
namespace {
// Newer LibTorch counts in nanoseconds (durationNs), older in microseconds.
template <typename E>
auto DurationUs(const E& e, int) -> decltype(e.durationNs(), uint64_t()) {
  return e.durationNs() / 1000;
}
template <typename E>
uint64_t DurationUs(const E& e, long) {
  return e.durationUs();
}
// A device event's span in nanoseconds, to the nanosecond where LibTorch
// counts them (whole microseconds summed over 12,000 kernels would make up idle).
template <typename E>
auto SpanOf(const E& e, int)
    -> decltype(e.startNs(), e.durationNs(), std::pair<uint64_t, uint64_t>()) {
  return {e.startNs(), e.startNs() + e.durationNs()};
}
template <typename E>
std::pair<uint64_t, uint64_t> SpanOf(const E& e, long) {
  return {e.startUs() * 1000, (e.startUs() + e.durationUs()) * 1000};
}
// The stream of a device event (Kineto's resource id), where LibTorch tells it.
template <typename E>
auto StreamOf(const E& e, int) -> decltype(e.deviceResourceId(), int64_t()) {
  return e.deviceResourceId();
}
template <typename E>
int64_t StreamOf(const E&, long) {
  return 0;
}
}  // namespace
#endif

std::unique_ptr<KernelProfile> KernelProfile::FromEnv() {
  const char* steps = std::getenv("TRELLIS_PROFILE_STEPS");
  if (steps == nullptr || *steps == '\0') return nullptr;
#ifndef TRELLIS_KERNEL_PROFILE
  throw TrainError("TRELLIS_PROFILE_STEPS is set, but this trellis-train was built without "
                   "-DTRELLIS_KERNEL_PROFILE=ON");
#else
  long long first = 0, count = 0;
  char tail = 0;
  if (std::sscanf(steps, "%lld:%lld%c", &first, &count, &tail) != 2 || first < 2 || count < 1)
    throw TrainError(std::string("TRELLIS_PROFILE_STEPS=") + steps +
                     ": expected FIRST:COUNT with FIRST >= 2 and COUNT >= 1");
  const char* out = std::getenv("TRELLIS_PROFILE_OUT");
  if (out == nullptr || *out == '\0')
    throw TrainError("TRELLIS_PROFILE_STEPS is set without TRELLIS_PROFILE_OUT (the file to write)");
  const char* host_env = std::getenv("TRELLIS_PROFILE_HOST");
  const std::string host = host_env != nullptr ? host_env : "";
  if (host != "" && host != "0" && host != "1")
    throw TrainError("TRELLIS_PROFILE_HOST=" + host + ": expected 1 (the host's calls too) or 0");
  const bool with_host = host == "1";
  return std::unique_ptr<KernelProfile>(new KernelProfile(first, count, out, with_host));
#endif
}

void KernelProfile::AfterStep(int64_t step) {
#ifdef TRELLIS_KERNEL_PROFILE
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  // With TRELLIS_PROFILE_HOST the host's ATen ops and CUDA runtime calls too,
  // for the long spans; off by default, as recording every op slows the host
  // and so the idle gaps it would explain.
  std::set<ActivityType> activities{ActivityType::CUDA};
  if (host_) activities.insert(ActivityType::CPU);
  if (step == first_ - 1) {
    const ProfilerConfig config(ProfilerState::KINETO);
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
    return;
  }
  if (step != first_ + count_ - 1) return;
  // The step's end has synchronized with the device: its kernels are done.
  std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  std::map<std::string, std::pair<uint64_t, int64_t>> by_name;  // us, calls
  std::vector<DeviceSpan> spans;
  std::vector<HostSpan> host;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CPU) {
      const auto [start, end] = SpanOf(e, 0);
      host.push_back({start, end, e.startThreadId(), e.name()});
      continue;
    }
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    auto& [us, calls] = by_name[e.name()];
    us += DurationUs(e, 0);
    ++calls;
    const auto [start, end] = SpanOf(e, 0);
    spans.push_back({start, end, StreamOf(e, 0), e.name()});
  }
  WriteTimeline(spans);
  if (host_) WriteLongSpans(host, spans);
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, v] : by_name) order.emplace_back(v.first, name);
  std::sort(order.rbegin(), order.rend());
  std::ofstream out(out_);
  for (const auto& [us, name] : order)
    out << us << '\t' << by_name[name].second << '\t' << name << '\n';
  if (!out) throw TrainError("TRELLIS_PROFILE_OUT " + out_ + ": cannot write it");
#else
  (void)step;
#endif
}

void KernelProfile::WriteTimeline(const std::vector<DeviceSpan>& spans) const {
  // Gaps under 20 us are launch latency between kernels in line; longer ones
  // are the device waiting on the host or on another stream.
  const std::string text = FormatTimeline(AnalyzeTimeline(spans, 20'000), count_, 15);
  std::ofstream out(out_ + ".timeline.txt");
  out << text;
  if (!out) throw TrainError("TRELLIS_PROFILE_OUT " + out_ + ".timeline.txt: cannot write it");
}

void KernelProfile::WriteLongSpans(const std::vector<HostSpan>& host,
                                   const std::vector<DeviceSpan>& device) const {
  // 1 ms: far above a launch; what a host call takes only when it waits.
  const std::string text = FormatLongSpans(host, device, 1'000'000, 80);
  std::ofstream out(out_ + ".long.txt");
  out << text;
  if (!out) throw TrainError("TRELLIS_PROFILE_OUT " + out_ + ".long.txt: cannot write it");
}

}  // namespace trellis::train
