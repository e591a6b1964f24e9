#!/usr/bin/env bash
# Rank 1 exits 3: the other ranks are stopped, the run ends FAILED and the
# attempt records exit code 3 and which rank caused it.
. "$(dirname "$0")/lib.sh"

start_controller
spec=$(write_spec fail3 'if [ "$RANK" = 1 ]; then echo failing >&2; exit 3; fi; exec sleep 120')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" FAILED 120
show=$(run_json "$id")
[ "$(json_get "$show" "d['attempts'][0]['exit_code']")" = 3 ] || fail "attempt exit code is not 3"
reason=$(json_get "$show" "d['state_reason']")
echo "$reason" | grep >/dev/null "rank 1 on node[0-9]* exited with 3" || fail "reason '$reason' does not name rank 1"
job=$(json_get "$show" "d['attempts'][0]['slurm_job_id']")
wait_job_gone "$job" 30
log "PASS: $id failed with '$reason'"
