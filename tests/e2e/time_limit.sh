#!/usr/bin/env bash
# A run whose ranks need longer than its time limit (2 minutes; 100 s of work,
# more than the 90 s before Slurm's warning, which comes 30 s ahead of the
# limit and may come up to 60 s earlier still): each attempt stops at Slurm's
# wall-time warning with a checkpoint, the run continues in a new attempt at
# once from that checkpoint without using a restart (max_restarts = 0), and it
# SUCCEEDS with its steps contiguous across attempts.
# Beside it, on the other two nodes, a run whose program stops at the warning
# without a checkpoint: a continuation would start from step 0 again, so its
# time limit counts as a restart, and with none allowed the run FAILS, saying
# why, after one attempt instead of looping.
# Both continue after an attempt ends (restart.continuation = "after"):
# continuation_ahead.sh runs the default, a continuation waiting ahead.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
limit=('time_limit = 2' 'signal_grace_s = 30' '[restart]' 'max_restarts = 0' 'continuation = "after"' '[env]'
       'STEPS = "200"' 'STEP_S = "0.5"')
stall=$(write_spec stall "exec python3 $STEPS_PY" "${limit[@]}" 'CKPT_AT_WARNING = "0"')
stall_id=$(trellis submit "$stall") || fail "submit failed"
spec=$(write_spec wall "exec python3 $STEPS_PY" "${limit[@]}")
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$stall_id" FAILED 300
show=$(run_json "$stall_id")
[ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "the stalled run was continued"
why=$(json_get "$show" "d['events'][-1]['reason']")
case "$why" in
  *"with no checkpoint newer than the start it resumed from"*"(0 of 0 restarts used)"*) ;;
  *) fail "the stalled run's end does not say why: $why" ;;
esac
log "the run without a checkpoint at the warning: FAILED after one attempt: $why"
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
# Contiguous: every step 1..200 recorded, and each attempt after the first
# starts right after a checkpoint of the one before.
steps=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT COUNT(DISTINCT step), MIN(step), MAX(step) FROM steps WHERE run_id='$id'")
[ "$steps" = "200|1|200" ] || fail "steps (count|min|max) are $steps, expected 200|1|200"
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
