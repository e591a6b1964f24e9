#include "worker/rpc/call_retry.h"

#include <algorithm>
#include <string>

#include "common/log.h"

namespace trellis::worker {

grpc::Status CallWithRetries(const char* what, Clock& clock, const BackoffPolicy& backoff,
                             const RetryLimits& limits,
                             const std::function<void(Seconds left)>& wait_connected,
                             const std::function<grpc::Status(Seconds budget)>& call,
                             const std::function<double()>& jitter_draw) {
  const SteadyTime end =
      clock.SteadyNow() + std::chrono::duration_cast<SteadyTime::duration>(limits.window);
  auto left = [&] { return Seconds(end - clock.SteadyNow()); };
  for (int retry = 0;; ++retry) {
    wait_connected(std::max(left(), Seconds(0)));
    Seconds budget = limits.per_call_fixed ? limits.per_call
                                           : std::min(limits.per_call, std::max(left(), kLastTry));
    grpc::Status st = call(budget);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return st;
    std::chrono::milliseconds delay = BackoffDelay(backoff, retry, jitter_draw());
    if (clock.SteadyNow() + delay >= end) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          std::string("controller unreachable for ") +
                              std::to_string(static_cast<int>(limits.window.count())) +
                              " s: " + st.error_message());
    }
    spdlog::info("{}: controller unavailable ({}); retrying in {} ms", what, st.error_message(),
                 delay.count());
    SleepFor(clock, delay);
  }
}

}  // namespace trellis::worker
