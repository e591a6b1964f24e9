#!/usr/bin/env bash
# Cancel while RUNNING: CANCELLED at once, and Slurm has nothing left of it.
. "$(dirname "$0")/lib.sh"

start_controller
spec=$(write_spec sleeper 'exec sleep 300')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 90
job=$(json_get "$(run_json "$id")" "d['attempts'][0]['slurm_job_id']")
out=$(trellis cancel "$id") || fail "cancel failed"
log "cancel: $out"
[ "$(run_state "$id")" = CANCELLED ] || fail "not CANCELLED after cancel"
wait_job_gone "$job" 30
# No rank process survives.
if pgrep -f "trellis-worker agent --controller 127.0.0.1:$CONTROLLER_PORT" >/dev/null; then
  fail "a worker of the cancelled run is still alive"
fi
trellis cancel "$id" >/dev/null || fail "cancelling a cancelled run should be a no-op"
log "PASS: $id cancelled, job $job gone"
