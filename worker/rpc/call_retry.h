#pragma once
// The retry loop of the worker's unary calls to the controller, on a Clock:
// a FakeClock drives its backoff and its window in tests. Blocking; runs on
// the caller's thread (before or after the worker's event loop).

#include <grpcpp/support/status.h>

#include <functional>

#include "common/clock.h"
#include "worker/core/args.h"
#include "worker/core/retry.h"

namespace trellis::worker {

struct RetryLimits {
  Seconds window{0};  // how long UNAVAILABLE is retried
  Seconds per_call{0};
  // A gate wait must not shrink with the retries: each try gets per_call.
  bool per_call_fixed = false;
};

// Runs `call(budget)` until it returns anything but UNAVAILABLE, or until the
// window has passed on `clock`. Before each try `wait_connected(left)` waits
// (in real time: gRPC's own) for the channel to connect, at most what is left
// of the window: a controller that comes back is called at once, not at the
// end of a backoff sleep. Each try gets min(per_call, what is left, at least
// kLastTry) unless per_call_fixed. The backoff (`jitter_draw` in [0, 1) per
// retry) only spaces tries that a connected controller answered UNAVAILABLE.
grpc::Status CallWithRetries(const char* what, Clock& clock, const BackoffPolicy& backoff,
                             const RetryLimits& limits,
                             const std::function<void(Seconds left)>& wait_connected,
                             const std::function<grpc::Status(Seconds budget)>& call,
                             const std::function<double()>& jitter_draw);

// A try made when the window is over still gets this long: enough to connect
// to a controller that just came back, or to be told why it cannot be reached.
inline constexpr Seconds kLastTry{5};

}  // namespace trellis::worker
