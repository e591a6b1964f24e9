#pragma once
// The time from a unary call's request to its reply
// (trellis_rpc_duration_seconds). Measured on the real steady clock: latency
// is the controller's own speed, not a schedule the controller's Clock drives.

#include <chrono>
#include <utility>

#include "controller/app/metrics.h"

namespace trellis::controller {

// `reply` (a Reply<T>'s callable), observing the call's duration first.
template <typename F>
auto Timed(Metrics& metrics, RpcMethod method, F reply) {
  return [&metrics, method, start = std::chrono::steady_clock::now(),
          reply = std::move(reply)](auto result) {
    metrics.ObserveRpc(method, std::chrono::steady_clock::now() - start);
    reply(std::move(result));
  };
}

}  // namespace trellis::controller
