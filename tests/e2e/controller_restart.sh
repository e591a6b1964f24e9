#!/usr/bin/env bash
# The controller is SIGKILLed while runs are RUNNING and started again:
#  a) run A ends while the controller is briefly down: the batch script's
#     question waits, the restarted controller answers, A SUCCEEDS;
#  b) run B ends while the controller stays down longer than the batch
#     script waits: B is settled from Slurm and exit.json at start-up.
. "$(dirname "$0")/lib.sh"

# The batch script asks the controller for at most this long (B's case).
export TRELLIS_NEXT_LAUNCH_TIMEOUT_S=4
start_controller
a=$(trellis submit "$(write_spec brief 'exec sleep 5')") || fail "submit a failed"
b=$(trellis submit "$(write_spec longer 'exec sleep 3')") || fail "submit b failed"
wait_state "$a" RUNNING 90
wait_state "$b" RUNNING 90
stop_controller KILL
log "controller killed"

# Wait until B's job is gone from Slurm: its batch script gave up asking and
# wrote exit.json on its own.
job_b=$(sqlite3 "$E2E_DIR/controller.db" "SELECT slurm_job_id FROM attempts WHERE run_id='$b'")
deadline=$((SECONDS + 60))
while squeue -h -j "$job_b" 2>/dev/null | grep -q .; do
  [ $SECONDS -lt $deadline ] || fail "job $job_b did not end"
  sleep 0.5
done
start_controller
wait_state "$b" SUCCEEDED 30
wait_state "$a" SUCCEEDED 60
grep -q "ended while the controller was down" "$E2E_DIR/controller.log" ||
  fail "the controller did not settle $b from Slurm at start-up"
log "PASS: $a and $b survived a controller SIGKILL"
