#!/usr/bin/env bash
# A spare pool whose node is short of memory is found before any relaunch
# needs it: node3 starts with one socket at 72.7 GiB free (min 100). A run of
# 2 nodes pinned to node[1-2] keeps a pool of one node; its pool job stands on
# node3, whose standby worker registers and fails the gate. node3 is
# quarantined with the figure, pool job 1 is cancelled, and pool job 2 stands
# on node4 with a standby worker that passes. The run SUCCEEDS; nothing of it
# is left in squeue.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"
use_clean_cluster
"$CLUSTER_CTL" fixture "$TRELLIS_TEST_CLUSTER" node3 gh200-short >/dev/null

db="$E2E_DIR/controller.db"
pool_row() {  # ID POOL COLUMN
  sqlite3 "$db" "SELECT $3 FROM pool_jobs WHERE run_id='$1' AND pool=$2"
}
wait_for() {  # WHAT TIMEOUT_S CONDITION...
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "$what: $(sqlite3 "$db" "SELECT * FROM pool_jobs")"
    sleep 0.5
  done
}
pool_ended() { [ -n "$(pool_row "$1" "$2" ended_ms)" ]; }
standing_by() {  # ID POOL NODE
  [ "$(sqlite3 "$db" "SELECT COUNT(*) FROM health_events WHERE run_id='$1' AND kind='spare_pool'
        AND detail LIKE 'node $3 of spare pool job $2 stands by: gate passed%'")" -gt 0 ]
}

start_controller
spec=$(write_spec poolgate "exec python3 $STEPS_PY" 'nodelist = "node[1-2]"' '[restart]' \
  'spare_pool_nodes = 1' '[gate]' 'min_free_gib_per_socket = 100.0' 'timeout_s = 60' \
  '[env]' 'STEPS = "150"' 'STEP_S = "0.1"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
wait_for "pool job 1 did not end within 60 s" 60 pool_ended "$id" 1
reason=$(pool_row "$id" 1 end_reason)
echo "$reason" | grep >/dev/null "node node3 failed the gate while standing by: socket 0: 72.7 GiB free < 100.0 GiB required" ||
  fail "pool job 1 ended for another reason: $reason"
log "pool job 1 on node3 ended: $reason"
trellis nodes --json >"$E2E_DIR/nodes.json"
[ "$(json_get "$E2E_DIR/nodes.json" "[n['name'] for n in d if n['state']=='quarantined']")" = "['node3']" ] ||
  fail "node3 is not the one quarantined node: $(cat "$E2E_DIR/nodes.json")"

wait_for "pool job 2 did not stand by on node4 within 60 s" 60 standing_by "$id" 2 node4
log "pool job 2 (Slurm job $(pool_row "$id" 2 job_id)) stands by on node4, off node3"

wait_state "$id" SUCCEEDED 120
[ "$(json_get "$(run_json "$id")" "len(d['launches'])")" = 1 ] || fail "expected one launch: no relaunch needed the pool"
for job in $(sqlite3 "$db" "SELECT slurm_job_id FROM attempts WHERE run_id='$id'") \
           $(sqlite3 "$db" "SELECT job_id FROM pool_jobs WHERE run_id='$id' AND job_id != ''"); do
  wait_job_gone "$job" 30
done
log "PASS: node3 failed the gate while standing by (quarantined, pool job 1 replaced); pool job 2 stood by on node4; $id SUCCEEDED"
