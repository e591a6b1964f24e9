#!/usr/bin/env bash
# checkpoint.every_steps = "auto" on a [model] run of 2 nodes x 2 ranks: the
# controller sends the ranks its nodes' failure rate at GO (here its prior,
# --node-mtbf-prior-hours, on a fresh database), the ranks time their steps,
# take a first checkpoint, and choose the next by Young's rule on what it
# cost; the choice is a health event in `trellis show` whose figures follow
# sqrt(2 x cost x MTBF), and the next checkpoint comes where it said.
. "$(dirname "$0")/lib.sh"

[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: built without trainer_core"; exit 77; }
spec=$(tiny_moe_spec -e 's/^steps = .*/steps = 80/' \
  -e 's/^every_steps = .*/every_steps = "auto"\nauto_min_s = 0/') ||
  fail "tiny-moe spec not written"

# 0.002 h: a node fails every 7.2 s, 2 nodes every 3.6 s; with a checkpoint of
# a few hundredths of a second, Young's period is a few tenths: some steps.
start_controller --node-mtbf-prior-hours 0.002
id=$(trellis submit "$spec") || fail "submit failed"
log "submitted $id"
wait_state "$id" SUCCEEDED 240
show=$(run_json "$id")
run_dir=$(json_get "$show" "d['run_dir']")

# The event: its figures follow the formula, with the MTBF the controller sent.
python3 - "$show" <<'PY' || fail "checkpoint_interval event wrong: $(json_get "$show" "d['health_events']")"
import json, math, sys
d = json.load(open(sys.argv[1]))
events = [e for e in d["health_events"] if e["kind"] == "checkpoint_interval"]
assert events, "no checkpoint_interval event"
for e in events:
    f = json.loads(e["detail_json"])
    assert abs(f["mtbf_s"] - 0.002 * 3600 / 2) < 1e-6, f  # the prior over 2 nodes
    young = math.sqrt(2 * f["cost_s"] * f["mtbf_s"])
    assert abs(f["young_s"] - young) <= 1e-9 * young, f
    # The nearest whole steps, at least one (auto_min_s = 0: unbounded); the
    # records' figures are rounded to the nanosecond, hence the tolerance.
    steps = young / f["step_s"]
    assert abs(f["every_steps"] - steps) <= 0.5 + 1e-6 or (f["every_steps"] == 1 and steps < 1), f
    assert f["cost_s"] > 0 and f["step_s"] > 0, f
    assert "sqrt(2 x" in e["detail"], e
    assert "2 nodes: every 0.001 h" in e["detail"], e["detail"]
print(events[0]["detail"])
PY
shown=$(trellis show "$id")
grep -q "checkpoint_interval" <<<"$shown" || fail "show does not list the interval: $shown"

# Rank 0's log says each choice; the checkpoint after a choice comes at the
# step it chose (records carry checkpoint_seconds on steps with checkpoint work).
first=$(grep -o 'every_steps = "auto" after step [0-9]*: every [0-9]*' \
  "$run_dir"/attempt-1/launch-1/rank-0.log | head -1)
[ -n "$first" ] || fail "rank 0's log has no auto choice"
read -r at every < <(echo "$first" | awk '{print $6, $8}')
at=${at%:}
log "first choice: after step $at, every $every steps"
[ "$at" = 4 ] || fail "the first auto checkpoint was at step $at, not 4 (two timed steps, auto_min_s = 0)"
next=$((at + every))
if [ "$next" -lt 80 ]; then
  grep -q "after step $next: every" "$run_dir"/attempt-1/launch-1/rank-0.log ||
    fail "no checkpoint at step $next, $every steps after step $at"
fi
log "PASS: $id checkpointed by Young's rule: $(grep -m1 checkpoint_interval <<<"$shown" | cut -c1-200)"
