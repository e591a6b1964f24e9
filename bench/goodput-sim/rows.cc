#include "bench/goodput-sim/rows.h"

namespace trellis::bench {

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

  return rows;
}

}  // namespace trellis::bench
