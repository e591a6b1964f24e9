#!/usr/bin/env bash
# A run with no spare node in its allocation and a spare pool of one node
# (restart.spare_pool_nodes = 1): its pool job stands on a node of its own,
# whose standby worker registers and passes the gate before any draw.
# A worker is killed: the allocation keeps one healthy node of the two needed,
# so the relaunch draws the pool job (its node joins through `srun --jobid`,
# no new attempt) and a new pool job refills the pool. The pool node's worker
# is killed in turn: the next relaunch draws the refilled pool. The run
# SUCCEEDS in its one Slurm job, and no job of the run is left in squeue.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

db="$E2E_DIR/controller.db"
pool_row() {  # ID POOL COLUMN
  sqlite3 "$db" "SELECT $3 FROM pool_jobs WHERE run_id='$1' AND pool=$2"
}
wait_pool_standing() {  # ID POOL: prints its node
  local deadline=$((SECONDS + 60))
  until [ -n "$(pool_row "$1" "$2" standing_ms)" ]; do
    [ $SECONDS -lt $deadline ] || fail "spare pool job $2 did not stand within 60 s: $(sqlite3 "$db" "SELECT * FROM pool_jobs")"
    sleep 0.5
  done
  pool_row "$1" "$2" nodelist
}
wait_steps_of_launch() {  # ID LAUNCH
  local deadline=$((SECONDS + 60))
  until [ "$(sqlite3 "$db" "SELECT COUNT(*) FROM steps WHERE run_id='$1' AND launch=$2")" -gt 3 ]; do
    [ $SECONDS -lt $deadline ] || fail "launch $2 reported no steps"
    sleep 0.2
  done
}
wait_standing_by() {  # ID POOL NODE: the standby worker registered and passed the gate
  local deadline=$((SECONDS + 60))
  until [ "$(sqlite3 "$db" "SELECT COUNT(*) FROM health_events WHERE run_id='$1' AND kind='spare_pool'
              AND detail LIKE 'node $3 of spare pool job $2 stands by: gate passed%'")" -gt 0 ]; do
    [ $SECONDS -lt $deadline ] || fail "the standby worker of pool job $2 on $3 did not register within 60 s"
    sleep 0.5
  done
}
kill_worker_on() {  # ID NODE
  local pid
  pid=$(worker_pid_on "$1" "$2")
  [ -n "$pid" ] || fail "no worker of $1 found on $2"
  kill -KILL "$pid"
  log "killed the worker on $2 (pid $pid)"
}

start_controller
spec=$(write_spec pool "exec python3 $STEPS_PY" '[restart]' 'max_restarts = 2' 'spare_pool_nodes = 1' \
  '[env]' 'STEPS = "400"' 'STEP_S = "0.1"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
pool1_node=$(wait_pool_standing "$id" 1)
pool1_job=$(pool_row "$id" 1 job_id)
log "spare pool job 1 (Slurm job $pool1_job) stands on $pool1_node"
wait_standing_by "$id" 1 "$pool1_node"
log "its standby worker on $pool1_node registered and passed the gate"
wait_steps_of_launch "$id" 1
victim=$(json_get "$(run_json "$id")" "d['attempts'][0]['nodes'][0]")
kill_worker_on "$id" "$victim"

# The relaunch draws pool job 1, and pool job 2 refills the pool.
pool2_node=$(wait_pool_standing "$id" 2)
log "spare pool job 2 (Slurm job $(pool_row "$id" 2 job_id)) refills the pool on $pool2_node"
[ "$(pool_row "$id" 1 drawn_attempt).$(pool_row "$id" 1 drawn_launch)" = 1.2 ] ||
  fail "pool job 1 was not drawn by relaunch 1.2: $(sqlite3 "$db" "SELECT * FROM pool_jobs")"
wait_steps_of_launch "$id" 2
show=$(run_json "$id")
nodes2=$(json_get "$show" "','.join(d['launches'][1]['nodes'])")
case ",$nodes2," in *",$pool1_node,"*) ;; *) fail "launch 2 ran on $nodes2, not on the pool's $pool1_node" ;; esac
case ",$nodes2," in *",$victim,"*) fail "launch 2 ran on the lost node $victim" ;; esac
# The standby worker left when its pool job was drawn; the relaunch's step ran beside it.
run_dir=$(sqlite3 "$db" "SELECT run_dir FROM runs WHERE run_id='$id'")
grep -q "leaving: spare pool job 1 joins relaunch 1.2" "$run_dir/pool-1.out" ||
  fail "pool job 1's standby worker did not leave at the draw: $(tail -5 "$run_dir/pool-1.out")"
wait_standing_by "$id" 2 "$pool2_node"

# The pool node's worker in turn: relaunch 3 draws pool job 2.
kill_worker_on "$id" "$pool1_node"
wait_state "$id" SUCCEEDED 180
show=$(run_json "$id")
[ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "expected one attempt (one Slurm job)"
[ "$(json_get "$show" "len(d['launches'])")" = 3 ] || fail "expected 3 launches"
for i in 0 1; do
  [ "$(json_get "$show" "d['launches'][$i]['failure_class']")" = node_lost ] ||
    fail "launch $((i + 1)): $(json_get "$show" "d['launches'][$i]")"
done
nodes3=$(json_get "$show" "','.join(d['launches'][2]['nodes'])")
case ",$nodes3," in *",$pool2_node,"*) ;; *) fail "launch 3 ran on $nodes3, not on the pool's $pool2_node" ;; esac
[ "$(pool_row "$id" 2 drawn_attempt).$(pool_row "$id" 2 drawn_launch)" = 1.3 ] ||
  fail "pool job 2 was not drawn by relaunch 1.3"
trellis show "$id" >"$E2E_DIR/show.txt"
grep -q "^spare pool" "$E2E_DIR/show.txt" || fail "show has no spare pool section"
grep -q "drawn into relaunch 1.2" "$E2E_DIR/show.txt" || fail "show does not say pool job 1 was drawn"
# Every pool job ended with the run, and nothing of it is left in Slurm's queue.
deadline=$((SECONDS + 30))
until [ "$(sqlite3 "$db" "SELECT COUNT(*) FROM pool_jobs WHERE run_id='$id' AND ended_ms IS NULL")" = 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "live pool jobs after the run ended: $(sqlite3 "$db" "SELECT * FROM pool_jobs")"
  sleep 0.5
done
for job in $(sqlite3 "$db" "SELECT slurm_job_id FROM attempts WHERE run_id='$id'") \
           $(sqlite3 "$db" "SELECT job_id FROM pool_jobs WHERE run_id='$id' AND job_id != ''"); do
  wait_job_gone "$job" 30
done
sed -n '/^spare pool/,/^$/p' "$E2E_DIR/show.txt"
log "PASS: relaunch 2 on $nodes2 (pool job 1), relaunch 3 on $nodes3 (pool job 2), one Slurm job, SUCCEEDED"
