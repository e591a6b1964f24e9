#include "bench/goodput-sim/rows.h"

#include <sstream>
#include <string>

namespace trellis::bench {

namespace {

// A probability as people write it: 0.9, not 0.900000.
std::string Fixed(double p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

// The pool size the mechanism rows use: of 1, 2 and 4 (the x_pool rows), 4
// leaves the fewest new attempts for 4 idle nodes, 0.2% of the run's.
constexpr int kPoolNodes = 4;

const char* const kPool =
    "a standing Slurm job of that many nodes of the run's own, submitted once the run's first "
    "job runs and waiting the queue like any; a failure that leaves too few healthy nodes in the "
    "allocation relaunches with the whole standing pool job joining (`DecideRecovery` rule 5, "
    "`draws_pool`) instead of a new attempt, and a new pool job is submitted at once to refill";

// The full set of mechanisms (`all`) with checkpoints behind the steps and
// the failure costs Trellis measured, each cited to its results file; the
// scenario's where Trellis has no figure of its own.
Row MeasuredCostsRow(const Strategy& all, const Scenario& base) {
  Scenario sc = base;
  sc.exit_detect_s = 1;
  sc.relaunch_s = 10;
  sc.checkpoint_stall_s = 0.19;
  sc.checkpoint_write_s = 17;
  Strategy st = all;
  st.key = "x_measured_costs";
  const std::string pool = "spare pool of " + std::to_string(kPoolNodes);
  st.label = "Trellis, 2 spares; continuations ahead; checkpoints \"auto\", behind the steps; " +
             pool + "; Trellis's measured failure costs";
  st.mechanism.clear();
  st.assumption_change =
      "the mechanisms of `" + all.key +
      "`, checkpoints written behind the steps (checkpoint.async = true), and the failure costs "
      "Trellis measured, each rounded up to the simulator's second where not whole: a rank that "
      "ends by itself (a device error, the same exit) noticed in 1 s instead of 30 (0.6 s from a "
      "rank's SIGSEGV to its relaunch, bench/results/gpu-e2e-2nodes-1gpu-2026-12-06.md); a "
      "relaunch, and a handoff's start, of 10 s to training instead of 120 (the same run: the "
      "relaunched ranks resumed 7.2 s after their GO, 1.5 s of it the checkpoint's read, and their "
      "first step took 1.7 s longer than the others, NCCL's set-up); a checkpoint stalls the steps "
      "0.19 s instead of 5 (the step after one began was 0.11-0.19 s longer, "
      "bench/results/checkpoint-behind-2026-12-05.md; none longer on an H100, "
      "bench/results/checkpoint-copy-2026-12-05-all-mapped-70steps.md) and is on disk 17 s later, "
      "a failure before then losing it too (writes behind the steps of 5.4-16.9 s for 6.2-10.9 GiB "
      "a rank, the same two files), a stop's written in place (0.19 + 17 s); \"auto\" then "
      "checkpoints every 65 s. Kept from the scenario, Trellis having no figure of its own: a lost "
      "worker and the network errors noticed in 30 s (restart.heartbeat_timeout_s, 30 by default; "
      "a worker killed with SIGKILL was relaunched on in 0.6 s, "
      "bench/results/heal-worker-kill-2026-12-01.md, but its node stayed up), a hang in 300 s "
      "(restart.hang_timeout_s, 600 by default), a new allocation's start of 300 s "
      "(bench/results/gate-2026-11-29.md measured the gate's decision alone, 1.0 s at 6,000 "
      "nodes), the queue waits, the trace and the faulty nodes. The figures come from runs of 2 "
      "ranks: the start and NCCL set-up of 16,384 ranks are not measured";
  return {st, sc};
}

}  // namespace

std::vector<Row> BenchRows() {
  const Scenario base;
  std::vector<Row> rows;

  // (1) No controller: every interruption resubmits at once; nothing is
  // blamed or kept out, so a faulty node may come back.
  Strategy plain;
  plain.key = "plain_resubmission";
  plain.label = "plain resubmission";
  plain.spares = 0;
  plain.quarantine = false;
  plain.relaunch_in_allocation = false;
  plain.backoff_s = 0;
  rows.push_back({plain, base});

  // (2) and (3): the controller as configured by default (backoff_s 30).
  Strategy trellis;
  trellis.key = "trellis_no_spares";
  trellis.label = "Trellis, no spares";
  trellis.spares = 0;
  rows.push_back({trellis, base});

  Strategy spares = trellis;
  spares.key = "trellis_2_spares";
  spares.label = "Trellis, 2 spares";
  spares.spares = 2;
  rows.push_back({spares, base});

  // Each mechanism as a row of its own, on top of (3), scenario unchanged.
  const char* kAhead =
      "restart.continuation = \"ahead\" (continuation_lead_s \"auto\", slurm.signal_grace_s "
      "120): the next attempt waits in Slurm's queue, eligible a lead before the time limit, and "
      "takes over at a step boundary when it starts (a handoff); a new attempt needed while it "
      "waits takes it";
  Strategy ahead = spares;
  ahead.key = "trellis_2_spares_ahead";
  ahead.label = "Trellis, 2 spares; continuations ahead";
  ahead.continuation_ahead = true;
  ahead.mechanism = kAhead;
  rows.push_back({ahead, base});

  const char* kAuto =
      "checkpoint.every_steps = \"auto\": a checkpoint every Young's sqrt(2 x stall x MTBF), "
      "the MTBF the trace's (what the controller's failure history converges to), within the "
      "spec's default bounds (60 s .. 4 h)";
  Strategy young = ahead;
  young.key = "trellis_2_spares_ahead_auto_checkpoints";
  young.label = "Trellis, 2 spares; continuations ahead; checkpoints \"auto\"";
  young.checkpoint_auto = true;
  young.mechanism = std::string(kAhead) + "; and " + kAuto;
  rows.push_back({young, base});

  // The spare pool, alone and with the mechanisms above.
  const std::string pool_text =
      "restart.spare_pool_nodes = " + std::to_string(kPoolNodes) + ": " + kPool;
  Strategy pool = spares;
  pool.key = "trellis_2_spares_pool";
  pool.label = "Trellis, 2 spares; spare pool of " + std::to_string(kPoolNodes);
  pool.spare_pool_nodes = kPoolNodes;
  pool.mechanism = pool_text;
  rows.push_back({pool, base});

  Strategy ahead_pool = ahead;
  ahead_pool.key = "trellis_2_spares_ahead_pool";
  ahead_pool.label =
      "Trellis, 2 spares; continuations ahead; spare pool of " + std::to_string(kPoolNodes);
  ahead_pool.spare_pool_nodes = kPoolNodes;
  ahead_pool.mechanism = std::string(kAhead) + "; and " + pool_text;
  rows.push_back({ahead_pool, base});

  Strategy all = young;
  all.key = "trellis_2_spares_ahead_auto_checkpoints_pool";
  all.label = "Trellis, 2 spares; continuations ahead; checkpoints \"auto\"; spare pool of " +
              std::to_string(kPoolNodes);
  all.spare_pool_nodes = kPoolNodes;
  all.mechanism = std::string(kAhead) + "; " + kAuto + "; and " + pool_text;
  rows.push_back({all, base});

  // Extra rows: each changes what assumption_change says, on top of (3).
  auto extra = [&](const char* key, const char* label, const char* change) {
    Strategy st = spares;
    st.key = key;
    st.label = label;
    st.assumption_change = change;
    return st;
  };
  Strategy unrepaired =
      extra("x_unrepaired_quarantine", "Trellis, 2 spares; quarantine does not repair",
            "a quarantined node is not repaired: it stays faulty until the site "
            "repairs it (24 h after its first failure) and may come back when its "
            "quarantine ends");
  unrepaired.quarantine_repairs = false;
  rows.push_back({unrepaired, base});
  // The controller's answer to it: a check before the node rejoins. The
  // check's catch rate and run time are assumptions (scenario.h).
  Strategy certified = unrepaired;
  certified.key = "x_certified_return";
  certified.label = "Trellis, 2 spares; quarantine does not repair; certified return";
  certified.certify_return = true;
  certified.assumption_change =
      "as `x_unrepaired_quarantine`, with certified return (--certify-return): a node whose "
      "quarantine expires stays out until a check job on it passes (" +
      std::to_string(certified.certify_check_s / 60) +
      " minutes of the node, not of the run, started at the expiry); a fault still there fails "
      "it with probability " + Fixed(certified.certify_catch) +
      " (assumed, not measured), a new strike that doubles the time out; a pass, or a miss of "
      "a fault still there, returns the node on probation";
  rows.push_back({certified, base});

  Strategy no_backoff = extra("x_backoff_0", "Trellis, 2 spares; restart.backoff_s = 0",
                              "restart.backoff_s = 0 instead of the default 30");
  no_backoff.backoff_s = 0;
  rows.push_back({no_backoff, base});

  Strategy never_resets =
      extra("x_backoff_never_resets", "Trellis, 2 spares; backoff never resets",
            "restart.backoff_reset_s = 604800 (a week) instead of the default 3600: no launch "
            "lasts that long under the 24 h time limit, so the backoff doubles with every "
            "restart of the run, as it did before the reset");
  never_resets.backoff_reset_s = 7 * 86400;
  rows.push_back({never_resets, base});

  Strategy many =
      extra("x_16_spares", "Trellis, 16 spares", "16 spare nodes per allocation instead of 2");
  many.spares = 16;
  rows.push_back({many, base});
  Strategy many_ahead = extra("x_16_spares_ahead", "Trellis, 16 spares; continuations ahead",
                              "16 spare nodes per allocation instead of 2, and continuations "
                              "ahead");
  many_ahead.spares = 16;
  many_ahead.continuation_ahead = true;
  rows.push_back({many_ahead, base});

  Scenario calm = base;
  calm.interruptions = 0;
  rows.push_back({extra("x_no_interruptions", "Trellis, 2 spares; no interruptions",
                        "no interruption at all: what the time-limit continuations and the "
                        "checkpoint stalls alone leave"),
                  calm});
  Strategy calm_ahead =
      extra("x_no_interruptions_ahead", "Trellis, 2 spares; no interruptions; continuations ahead",
            "no interruption at all, and continuations ahead: what the time limits and the "
            "checkpoint stalls alone leave with the mechanism (its bound)");
  calm_ahead.continuation_ahead = true;
  rows.push_back({calm_ahead, calm});

  // Every interruption relaunched: no time limit, more spares than strikes.
  Scenario endless = base;
  endless.time_limit_s = 0;
  endless.cluster_nodes = 2560;
  Strategy bound = extra("x_relaunch_bound", "bound: no time limit, 512 spares",
                         "no time limit; 512 spares in a 2,560-node partition: no new attempt, "
                         "the best a controller can do with the scenario's failure costs");
  bound.spares = 512;
  rows.push_back({bound, endless});

  Scenario cheaper = endless;
  cheaper.relaunch_s = 30;
  cheaper.checkpoint_stall_s = 1;
  cheaper.checkpoint_every_s = 150;
  Strategy fast = extra("x_relaunch_bound_cheaper", "bound with cheaper failures",
                        "as the bound, and a relaunch of 30 s, a checkpoint every 150 s "
                        "stalling 1 s");
  fast.spares = 512;
  rows.push_back({fast, cheaper});

  for (int n : {1, 2}) {
    const std::string size = std::to_string(n);
    Strategy other = extra("", "", "");
    other.key = "x_pool_" + size + "_ahead";
    other.label = "Trellis, 2 spares; continuations ahead; spare pool of " + size;
    other.assumption_change = "a spare pool of " + size + (n == 1 ? " node" : " nodes") +
                              " instead of " + std::to_string(kPoolNodes) +
                              ", with continuations ahead";
    other.continuation_ahead = true;
    other.spare_pool_nodes = n;
    rows.push_back({other, base});
  }

  Row measured = MeasuredCostsRow(all, base);
  rows.push_back(measured);
  // With a handoff at 10 s, a lead that catches more of the queue's tail
  // costs little: the user's continuation_lead_s, a third of the 24 h limit.
  Row longer = measured;
  longer.strategy.key = "x_measured_costs_lead_8h";
  longer.strategy.label = measured.strategy.label + "; continuation_lead_s = 8 h";
  longer.strategy.continuation_lead_s = 8 * 3600;
  longer.strategy.assumption_change =
      "as `x_measured_costs`, with restart.continuation_lead_s = 28800 (8 h, a third of the "
      "24 h limit) instead of \"auto\" (the lead that loses the least with a handoff taken at "
      "300 s, where this row's cost 10 s)";
  rows.push_back(longer);
  return rows;
}

}  // namespace trellis::bench
