#!/usr/bin/env bash
# One controller per state directory, and a takeover from another host
# (docs/architecture.md, "A controller that outlives its login node"):
#  1. a second controller on the same state directory refuses to start while
#     the first holds the lease (exit 73), naming the holder;
#  2. the first is SIGKILLed while a run trains (its host is gone); one
#     started at once "on another host" (--test-hostname) is refused while the
#     lease is live, then, once it expired, watches it and takes over on a new
#     port, writing its address to the state directory;
#  3. the run's workers follow the address file to the new port; the run
#     SUCCEEDS with every step of every rank stored; the CLI finds the new
#     controller through TRELLIS_STATE_DIR alone.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"
TTL=3
STEPS=250

start_controller --lease-ttl-s "$TTL"
first_pid=$CONTROLLER_PID
grep >/dev/null "lease $E2E_DIR/controller.lease taken (it was free)" "$E2E_DIR/controller.log" ||
  fail "the first controller did not say it took the lease"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a["address"]==sys.argv[2], a' \
  "$E2E_DIR/controller.address" "127.0.0.1:$CONTROLLER_PORT" ||
  fail "the address file does not name 127.0.0.1:$CONTROLLER_PORT"

# A second controller (its own port and socket) on the same state directory.
second() {  # LOG [flags]: runs one to its exit; prints its exit code
  local log=$1
  shift
  "$TRELLIS_BIN/trellis-controller" --listen 127.0.0.1:0 --socket "$E2E_DIR/ctl2/controller.sock" \
    --db "$E2E_DIR/controller.db" --output-root "$E2E_DIR/runs" --data-root "$E2E_DIR" \
    --metrics-listen off --lease-ttl-s "$TTL" "$@" >"$log" 2>&1 && echo 0 || echo $?
}
rc=$(second "$E2E_DIR/second.log")
[ "$rc" = 73 ] || fail "a second controller exited $rc, not 73: $(tail -3 "$E2E_DIR/second.log")"
grep >/dev/null "another controller holds the state directory.*host $(hostname), pid $first_pid" \
  "$E2E_DIR/second.log" || fail "the refusal does not name the holder: $(cat "$E2E_DIR/second.log")"
log "a second controller was refused, naming host $(hostname) pid $first_pid"
# Another state directory, the first's port: the port is the first's alone.
mkdir -p "$E2E_DIR/other"
if "$TRELLIS_BIN/trellis-controller" --listen "127.0.0.1:$CONTROLLER_PORT" \
     --socket "$E2E_DIR/ctl3/controller.sock" --state-dir "$E2E_DIR/other" \
     --metrics-listen off >"$E2E_DIR/other.log" 2>&1; then
  fail "a controller started on the first's port"
fi
grep >/dev/null "cannot bind" "$E2E_DIR/other.log" || fail "no bind error: $(cat "$E2E_DIR/other.log")"

spec=$(write_spec moved "exec python3 $STEPS_PY" '[env]' "STEPS = \"$STEPS\"" 'STEP_S = "0.1"' \
  'CKPT_EVERY = "50"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
wait_complete_steps "$id" 5 30
stop_controller KILL
log "first controller killed at $(complete_steps "$id") steps stored"

# At once, from "another host": the lease is live by its age.
rc=$(second "$E2E_DIR/early.log" --test-hostname other-login)
[ "$rc" = 73 ] || fail "a controller elsewhere started while the lease was live (exit $rc)"
sleep "$TTL"
old_port=$CONTROLLER_PORT
CONTROLLER_PORT=0  # a new port: the workers must find it
start_controller --lease-ttl-s "$TTL" --test-hostname other-login
[ "$CONTROLLER_PORT" != "$old_port" ] || fail "the new controller took the old port"
grep >/dev/null "watching it $TTL s before taking it over" "$E2E_DIR/controller.log" ||
  fail "the new controller did not watch the lease"
grep >/dev/null "taken over from host $(hostname), pid $first_pid" "$E2E_DIR/controller.log" ||
  fail "the new controller did not say whose lease it took"

# The CLI from the state directory alone.
unset TRELLIS_ADDR
export TRELLIS_STATE_DIR=$E2E_DIR
wait_state "$id" SUCCEEDED 120
# Each worker's log (the job's output file) says it followed.
moved=$(grep -rl "the controller moved: 127.0.0.1:$old_port -> 127.0.0.1:$CONTROLLER_PORT" \
  "$E2E_DIR/runs" | wc -l)
[ "$moved" -ge 1 ] || fail "no worker log says it followed the controller"
[ "$(complete_steps "$id")" = "$STEPS" ] ||
  fail "$(complete_steps "$id") of $STEPS steps stored with all 4 ranks"
log "PASS: refused while held; taken over from another host; $id SUCCEEDED with all $STEPS steps"
