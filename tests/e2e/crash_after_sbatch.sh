#!/usr/bin/env bash
# The controller is SIGKILLed right after sbatch returned the job id, before it
# stored it (a test hook). Started again, it finds the attempt's job by its
# name and adopts it: one Slurm job for the attempt, and the run succeeds.
. "$(dirname "$0")/lib.sh"

start_controller --test-kill-after-sbatch
id=$(trellis submit "$(write_spec once 'exec sleep 4')") || fail "submit failed"
deadline=$((SECONDS + 30))
while kill -0 "$CONTROLLER_PID" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the controller was not killed after sbatch"
  sleep 0.1
done
CONTROLLER_PID=""
# The attempt's job name carries a tag from its secret's digest (AttemptJobName).
name="trellis-$id.1.$(tr -d '\n' <"$E2E_DIR/runs/$id/attempt-1/secret" | sha256sum | cut -c1-8)"
jobs=$(squeue -h -n "$name" -o %i)
[ "$(echo "$jobs" | grep -c .)" = 1 ] || fail "expected one job named $name, got: '$jobs'"
stored=$(sqlite3 "$E2E_DIR/controller.db" "SELECT COUNT(*) || '|' || slurm_job_id FROM attempts WHERE run_id='$id'")
[ "$stored" = "1|" ] || fail "expected attempt 1 stored without its job id, got '$stored'"
log "killed after sbatch: job $jobs of $name exists, attempt 1 stored without it"

start_controller
wait_state "$id" SUCCEEDED 90
stored=$(sqlite3 "$E2E_DIR/controller.db" "SELECT COUNT(*) || '|' || slurm_job_id FROM attempts WHERE run_id='$id'")
[ "$stored" = "1|$jobs" ] || fail "expected attempt 1 to be job $jobs, got '$stored'"
grep -q "already had Slurm job $jobs" "$E2E_DIR/controller.log" ||
  fail "the controller did not say it adopted job $jobs"
# The run is SUCCEEDED once its ranks report; the batch script's last step
# (next-launch, exit) may hold the job in the queue a moment longer.
for _ in $(seq 1 100); do
  left=$(squeue -h -n "$name" -o %i)
  [ -z "$left" ] && break
  sleep 0.2
done
[ -z "$left" ] || fail "jobs named $name still queued 20 s after SUCCEEDED: $left"
log "PASS: job $jobs adopted after the restart, no second job, $id SUCCEEDED"
