#include "bench/goodput-sim/ledger.h"

#include <chrono>

namespace trellis::bench {

int64_t Ledger::total_ms() const {
  return productive_ms + stall_ms + redone_ms + detection_ms + relaunch_ms + backoff_ms + queue_ms +
         start_ms + handoff_ms + after_fail_ms;
}

namespace {

int64_t Ms(controller::Goodput::Span s) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(s).count();
}

void Expect(const char* what, int64_t computed, int64_t ledger, std::string* mismatch) {
  if (computed == ledger) return;
  if (!mismatch->empty()) *mismatch += "; ";
  *mismatch += std::string(what) + ": ComputeGoodput " + std::to_string(computed) + " ms, ledger " +
               std::to_string(ledger) + " ms";
}

}  // namespace

GoodputCheck CheckAgainstComputeGoodput(const Ledger& l, const GoodputLog& log, WallTime horizon) {
  GoodputCheck c;
  c.goodput = controller::ComputeGoodput(log.changes, log.launches, horizon);
  const controller::Goodput& g = c.goodput;
  Expect("queued", Ms(g.queued), l.backoff_ms + l.queue_ms, &c.mismatch);
  Expect("gating", Ms(g.gating), l.start_ms, &c.mismatch);
  Expect("running", Ms(g.running), l.productive_ms + l.stall_ms + l.undetected_at_end_ms,
         &c.mismatch);
  Expect("redone + restarting", Ms(g.redone) + Ms(g.restarting),
         l.redone_ms + l.detection_ms + l.relaunch_ms - l.undetected_at_end_ms, &c.mismatch);
  Expect("handoff", Ms(g.handoff), l.handoff_ms, &c.mismatch);
  Expect("total", Ms(g.total()), l.total_ms() - l.after_fail_ms, &c.mismatch);
  c.agrees = c.mismatch.empty();
  return c;
}

}  // namespace trellis::bench
