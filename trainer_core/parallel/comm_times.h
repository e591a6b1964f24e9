#pragma once
// How a window's collective time is counted, from each collective's moments
// (pure; comm_clock.* takes the moments). Torch-free.
//
// A group's collectives run one after another in the order they were issued
// (one NCCL stream per communicator, one gloo thread per group), so each one
// runs from max(its issue, the previous one's end) to its end: `total` sums
// those spans over every group. `exposed` is the time the caller's work stood
// waiting: the union of [reached its wait, the collective's end] over all
// waits (clipped at 0). Every such span lies inside its group's busy time,
// so 0 <= exposed <= total.

#include <vector>

#include "trainer_core/parallel/comm.h"

namespace trellis::train {

// Seconds from the window's start.
struct CollectiveSpan {
  int group = 0;
  double issued = 0;  // the caller's work reached the call
  double done = 0;    // the collective ended
  double waited = -1;  // the caller's work reached its Wait; < 0: never waited
};

// `spans` in issue order.
CommTimes SumCollectives(const std::vector<CollectiveSpan>& spans);

}  // namespace trellis::train
