#!/usr/bin/env bash
# kill -9 of one node's worker, with a spare node: srun ends the launch, the
# node whose worker never sent its final report is lost and struck (with the
# evidence), and the controller relaunches inside the same Slurm job on the
# spare (launch 2); the run SUCCEEDS. Prints the time from the kill to the
# first step record of launch 2 (bench/heal/worker_kill.sh records it).
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec lost "exec python3 $STEPS_PY" 'spare_nodes = 1' '[restart]' 'max_restarts = 1' \
  '[env]' 'STEPS = "60"' 'STEP_S = "0.1"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
# Until launch 1 has reported steps.
deadline=$((SECONDS + 30))
until [ "$(sqlite3 "$E2E_DIR/controller.db" "SELECT COUNT(*) FROM steps WHERE run_id='$id'")" -gt 3 ]; do
  [ $SECONDS -lt $deadline ] || fail "launch 1 reported no steps"
  sleep 0.2
done
victim_node=$(json_get "$(run_json "$id")" "d['attempts'][0]['nodes'][1]")
pid=$(worker_pid_on "$id" "$victim_node")
[ -n "$pid" ] || fail "no worker of $id found on $victim_node"
kill_ms=$(date +%s%3N)
kill -KILL "$pid"
log "killed the worker on $victim_node (pid $pid)"

wait_state "$id" SUCCEEDED 120
show=$(expect_node_lost_relaunch "$id" "$victim_node")
[ "$(json_get "$show" "d['launches'][1]['launch']")" = 2 ] || fail "no launch 2"
nodes2=$(json_get "$show" "','.join(d['launches'][1]['nodes'])")
case ",$nodes2," in *",$victim_node,"*) fail "launch 2 ran on the lost node ($nodes2)" ;; esac
trellis nodes --json >"$E2E_DIR/nodes.json"
json_get "$E2E_DIR/nodes.json" "[n['name'] for n in d if n['state']=='quarantined']" | grep >/dev/null "$victim_node" ||
  fail "$victim_node is not quarantined"
first2_ms=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT MIN(updated_ms) FROM steps WHERE run_id='$id' AND launch=2")
log "PASS: relaunched on $nodes2; kill -> first step of launch 2: $((first2_ms - kill_ms)) ms"
echo "kill_to_first_step_ms=$((first2_ms - kill_ms))"
