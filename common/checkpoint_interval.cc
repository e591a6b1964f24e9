#include "common/checkpoint_interval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace trellis {

namespace {

// A step time the choice may divide by: a step of no measurable time counts
// as a microsecond.
double StepSeconds(double step_s) { return std::max(step_s, 1e-6); }

std::string Figure(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Seconds as a person reads them: "6.0 s", "2.6 h".
std::string Span(double s) {
  if (s >= 7200) return Figure("%.1f h", s / 3600);
  if (s >= 600) return Figure("%.0f min", s / 60);
  return Figure("%.1f s", s);
}

}  // namespace

CheckpointInterval ChooseCheckpointInterval(const CheckpointIntervalInput& in) {
  CheckpointInterval out;
  out.young_s = std::sqrt(2 * std::max(in.cost_s, 0.0) * std::max(in.mtbf_s, 0.0));
  out.period_s = out.young_s;
  if (out.period_s < in.min_s) {
    out.period_s = in.min_s;
    out.bound = CheckpointInterval::Bound::kMin;
  } else if (out.period_s > in.max_s) {
    out.period_s = in.max_s;
    out.bound = CheckpointInterval::Bound::kMax;
  }
  out.steps = std::max<int64_t>(1, std::llround(out.period_s / StepSeconds(in.step_s)));
  return out;
}

int64_t FirstAutoCheckpointSteps(double step_s, double min_s) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(min_s / StepSeconds(step_s))));
}

std::string DescribeCheckpointInterval(const CheckpointIntervalInput& in,
                                       const CheckpointInterval& out) {
  std::string s = "every " + std::to_string(out.steps) + " step" + (out.steps == 1 ? "" : "s") +
                  " (" + Span(out.period_s) + " at " + Figure("%.3g", in.step_s) +
                  " s a step): sqrt(2 x " + Figure("%.3g", in.cost_s) + " s a checkpoint x " +
                  Span(in.mtbf_s) + " between failures) = " + Span(out.young_s);
  if (out.bound == CheckpointInterval::Bound::kMin)
    s += ", raised to checkpoint.auto_min_s (" + Span(in.min_s) + ")";
  if (out.bound == CheckpointInterval::Bound::kMax)
    s += ", lowered to checkpoint.auto_max_s (" + Span(in.max_s) + ")";
  return s;
}

}  // namespace trellis
