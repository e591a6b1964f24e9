#!/usr/bin/env bash
# `scontrol requeue` of a running job: Slurm kills the launch and puts the job
# back in its queue under the same id. The run waits as SUBMITTED, the batch
# script started again asks for the attempt's next launch, which is gated
# again and resumes from the newest checkpoint. The run SUCCEEDS with one
# attempt (one Slurm job), no restart used (max_restarts = 0), and every step.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec requeue "exec python3 $STEPS_PY" '[restart]' 'max_restarts = 0' \
  '[env]' 'STEPS = "120"' 'STEP_S = "0.25"' 'CKPT_EVERY = "10"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
db="$E2E_DIR/controller.db"
deadline=$((SECONDS + 60))
until [ "$(sqlite3 "$db" "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id='$id'")" -ge 30 ]; do
  [ $SECONDS -lt $deadline ] || fail "the run did not reach step 30"
  sleep 0.5
done
job=$(json_get "$(run_json "$id")" "d['attempts'][0]['slurm_job_id']")
[ -n "$job" ] || fail "attempt 1 of $id has no Slurm job"
log "requeueing job $job"
scontrol requeue "$job" || fail "scontrol requeue $job failed"
wait_state "$id" SUBMITTED 60
# Slurm holds a requeued job back for a while (BeginTime); a test need not wait
# that long, but must not start it again in the second its credential was
# revoked: slurmd refuses a credential no newer than the revocation ("Job
# credential revoked") and the job ends FAILED. The job is PENDING, so the
# revocation is already behind us; two seconds on, any new credential is newer.
scontrol update JobId="$job" StartTime=now+2 || fail "could not release job $job"
wait_state "$id" SUCCEEDED 180

show=$(run_json "$id")
[ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "more than one attempt"
[ "$(json_get "$show" "d['attempts'][0]['slurm_job_id']")" = "$job" ] || fail "not job $job"
[ "$(json_get "$show" "d['restarts']")" = 0 ] || fail "a restart was used"
classes=$(json_get "$show" "[l['failure_class'] for l in d['launches']]")
[ "$(json_get "$show" "[l['failure_class'] for l in d['launches']] == ['terminated', 'succeeded']")" = True ] ||
  fail "launches are $classes, expected a terminated one, then one that succeeded"
grep -q "Slurm requeued job $job" "$E2E_DIR/controller.log" ||
  fail "the controller did not say that Slurm requeued job $job"
steps=$(sqlite3 "$db" "SELECT COUNT(DISTINCT step), MIN(step), MAX(step) FROM steps WHERE run_id='$id'")
[ "$steps" = "120|1|120" ] || fail "steps (count|min|max) are $steps, expected 120|1|120"
first=$(sqlite3 "$db" "SELECT MIN(step) FROM steps WHERE run_id='$id' AND launch=2")
[ -f "$E2E_DIR/runs/$id/checkpoints/step-$(printf %08d $((first - 1)))/manifest.json" ] ||
  fail "launch 2 started at step $first, not after a checkpoint"
# Written by the batch script's second run: the controller sets aside an exit.json
# older than Slurm's last requeue (docs/architecture.md, "A run's life").
grep -q '"restarts": 1' "$E2E_DIR/runs/$id/attempt-1/exit.json" ||
  fail "attempt-1/exit.json does not say it was written after restart 1"
log "PASS: job $job requeued, $id SUCCEEDED in one attempt ($classes), launch 2 from step $first"
