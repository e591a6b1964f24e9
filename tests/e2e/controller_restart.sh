#!/usr/bin/env bash
# The controller is SIGKILLed while two runs are RUNNING and started again:
#  a) run A ends while the controller is down (its workers leave their final
#     reports in files, its batch script gives up asking and writes
#     exit.json): A is settled from Slurm and exit.json at start-up;
#  b) run B is still running when the controller is back: its launch is
#     known again from its stored GO (RUNNING, watched), its workers' final
#     reports after the restart count, and it settles when its batch script asks.
. "$(dirname "$0")/lib.sh"

# The batch script asks the controller for at most this long (A's case).
export TRELLIS_NEXT_LAUNCH_TIMEOUT_S=4
start_controller
# Each run's ranks work until the test lets them end (a file appears), so what
# ends while the controller is down is chosen here, never by a timer racing a
# loaded machine.
until_file() { printf "until [ -e '%s' ]; do sleep 0.2; done" "$E2E_DIR/$1"; }
a=$(trellis submit "$(write_spec brief "$(until_file a.end)")") || fail "submit a failed"
b=$(trellis submit "$(write_spec longer "$(until_file b.end)")") || fail "submit b failed"
wait_state "$a" RUNNING 90
wait_state "$b" RUNNING 90
stop_controller KILL
log "controller killed"
touch "$E2E_DIR/a.end"

job_a=$(sqlite3 "$E2E_DIR/controller.db" "SELECT slurm_job_id FROM attempts WHERE run_id='$a'")
wait_job_gone "$job_a" 120  # its workers try to report for 15 s, its batch script 4 s
log "job $job_a of $a ended while the controller was down"
start_controller
wait_state "$a" SUCCEEDED 30
grep -q "run $a: job $job_a ended while the controller was down" "$E2E_DIR/controller.log" ||
  fail "the controller did not settle $a from Slurm at start-up"
# A's workers could not send their final reports: the files they wrote first
# in the launch's directory were read when its launch was known again.
[ "$(grep -c "run $a: launch 1.1: the final report of .* was read from its file" \
  "$E2E_DIR/controller.log")" = 2 ] || fail "A's two final report files were not read at start-up"
[ "$(run_state "$b")" = RUNNING ] || fail "$b is not tracked as RUNNING after the restart"
grep -q "run $b: launch 1.1 on .* ran before the restart: watched again" "$E2E_DIR/controller.log" ||
  fail "the controller did not resume $b's launch"
touch "$E2E_DIR/b.end"
wait_state "$b" SUCCEEDED 90
reason=$(json_get "$(run_json "$b")" "d['state_reason']")
[ "$reason" = "all 4 ranks exited 0" ] || fail "$b was not settled from its ranks' reports: '$reason'"
log "PASS: $a settled at start-up; $b settled by its batch script ($reason)"
