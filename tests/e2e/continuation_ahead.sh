#!/usr/bin/env bash
# Continuations ahead (the default, restart.continuation = "ahead"): a run with
# a 3-minute limit and 8 minutes of work (960 steps of 0.5 s). While an
# attempt trains, the next one waits in Slurm's queue, eligible a lead before
# the limit (auto: 90 s past the warning's 10 s, since Slurm may send it a
# minute early, cut to half the limit: 90 s); when it starts, its nodes are
# gated, the current ranks stop at a
# step boundary with a checkpoint (a handoff), and it resumes from there.
# The ranks stop together (STOP_ALIGN, steps.py), as the trainer's agree.
# Checked: at least 3 attempts, every step stored exactly once, no two
# attempts training at once, the gap from an attempt's last step to the
# next one's first under 15 s (printed), one Slurm job per attempt, no
# restart used, and nothing of the run left in squeue at the end.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec ahead "exec python3 $STEPS_PY" 'time_limit = 3' 'signal_grace_s = 10' \
  '[restart]' 'max_restarts = 0' '[env]' 'STEPS = "960"' 'STEP_S = "0.5"' 'STOP_ALIGN = "10"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" SUCCEEDED 900
show=$(run_json "$id")
db="$E2E_DIR/controller.db"
# The attempts that ran (one that waited ahead past the run's end was not needed).
attempts=$(json_get "$show" "len([a for a in d['attempts'] if not a['waiting']])")
[ "$attempts" -ge 3 ] || fail "$attempts attempt(s): expected at least 3"
[ "$(json_get "$show" "d['restarts']")" = 0 ] || fail "restarts were used"
classes=$(json_get "$show" "[l['failure_class'] for l in d['launches']]")
[ "$(json_get "$show" "all(l['failure_class'] == 'handoff' for l in d['launches'][:-1])")" = True ] ||
  fail "launches before the last did not end as handoffs: $classes"
[ "$(json_get "$show" "d['launches'][-1]['failure_class']")" = succeeded ] ||
  fail "the last launch did not succeed: $classes"
# One Slurm job per attempt; every attempt taken up ran a launch; at most one,
# the last, waited ahead in vain (the run ended first) and was ended.
jobs=$(sqlite3 "$db" "SELECT SUM(waiting = 0 AND launches > 0) || '|' || \
  (COUNT(DISTINCT slurm_job_id) - COUNT(*)) || '|' || SUM(waiting = 1 AND ended_ms IS NULL) || \
  '|' || SUM(waiting) FROM attempts WHERE run_id='$id'")
case "$jobs" in
  "$attempts|0|0|0" | "$attempts|0|0|1") ;;
  *) fail "ran|jobs-rows|waiting live|waiting is $jobs, expected $attempts|0|0|(0 or 1)" ;;
esac
# Each step once, 1..960.
steps=$(sqlite3 "$db" \
  "SELECT COUNT(*) || '|' || COUNT(DISTINCT step) || '|' || MIN(step) || '|' || MAX(step) \
   FROM steps WHERE run_id='$id'")
[ "$steps" = "960|960|1|960" ] || fail "steps (rows|distinct|min|max) are $steps, expected 960|960|1|960"
# Attempt by attempt: when its first and last steps were stored.
spans=$(sqlite3 -separator ' ' "$db" \
  "SELECT attempt, MIN(step), MAX(step), MIN(updated_ms), MAX(updated_ms) FROM steps \
   WHERE run_id='$id' GROUP BY attempt ORDER BY attempt")
prev_end=""
gaps=""
while read -r a first last start end; do
  log "attempt $a: steps $first..$last over $(( (end - start) / 1000 )) s"
  if [ -n "$prev_end" ]; then
    gap_ms=$((start - prev_end))
    [ "$gap_ms" -gt 0 ] || fail "attempt $a trained while the one before it did (overlap ${gap_ms} ms)"
    gaps="$gaps $(printf '%d.%03d' $((gap_ms / 1000)) $((gap_ms % 1000)))"
    [ "$gap_ms" -lt 15000 ] || fail "the handoff to attempt $a took $gap_ms ms (15 s at most)"
  fi
  prev_end=$end
done <<<"$spans"
log "handoff gaps (last step of one attempt to the first of the next, s):$gaps"
# Nothing of the run is left queued or running.
deadline=$((SECONDS + 30))
while squeue -h -u "$(id -u)" -o '%j' | grep >/dev/null "^trellis-$id\."; do
  [ $SECONDS -lt $deadline ] || fail "jobs of $id still in squeue: $(squeue -h -u "$(id -u)" -o '%i %j %T')"
  sleep 1
done
log "PASS: $id SUCCEEDED in $attempts attempts ($classes), handoff gaps$gaps s, no restart used"
