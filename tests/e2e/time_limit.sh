#!/usr/bin/env bash
# A run whose ranks need longer than its partition time limit (3 minutes; 150 s
# of work, more than the 120 s before Slurm's warning, which comes 60 s ahead
# of the limit and may come up to 60 s earlier still): each attempt stops at Slurm's
# wall-time warning with a checkpoint, the run continues in a new attempt at
# once from that checkpoint without using a restart (max_restarts = 0), and it
# SUCCEEDS with its steps contiguous across attempts.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec wall "exec python3 $STEPS_PY" 'time_limit = 3' 'signal_grace_s = 60' \
  '[restart]' 'max_restarts = 0' '[env]' 'STEPS = "300"' 'STEP_S = "0.5"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" SUCCEEDED 600
show=$(run_json "$id")
attempts=$(json_get "$show" "len(d['attempts'])")
[ "$attempts" -ge 2 ] || fail "one attempt: the time limit was never reached"
[ "$(json_get "$show" "d['restarts']")" = 0 ] || fail "restarts were used"
classes=$(json_get "$show" "[l['failure_class'] for l in d['launches']]")
[ "$(json_get "$show" "all(l['failure_class'] == 'time_limit' for l in d['launches'][:-1])")" = True ] ||
  fail "launches before the last did not end as time-limit stops: $classes"
[ "$(json_get "$show" "d['launches'][-1]['failure_class']")" = succeeded ] ||
  fail "the last launch did not succeed: $classes"
# Contiguous: every step 1..300 recorded, and each attempt after the first
# starts right after a checkpoint of the one before.
steps=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT COUNT(DISTINCT step), MIN(step), MAX(step) FROM steps WHERE run_id='$id'")
[ "$steps" = "300|1|300" ] || fail "steps (count|min|max) are $steps, expected 300|1|300"
firsts=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT attempt || ':' || MIN(step) FROM steps WHERE run_id='$id' GROUP BY attempt ORDER BY attempt")
log "first step of each attempt: $(echo $firsts)"
for entry in $firsts; do
  a=${entry%%:*}; first=${entry#*:}
  [ "$a" = 1 ] && continue
  [ -f "$E2E_DIR/runs/$id/checkpoints/step-$(printf %08d $((first - 1)))/manifest.json" ] ||
    fail "attempt $a started at step $first, not after a checkpoint"
done
log "PASS: $id SUCCEEDED in $attempts attempts ($classes), no restart used"
