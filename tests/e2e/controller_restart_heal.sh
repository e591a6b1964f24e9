#!/usr/bin/env bash
# The controller is SIGKILLed while a run with a spare node trains, and
# started again: it knows the running launch again from its stored GO and its
# workers' stored final reports (docs/architecture.md, "A launch that runs
# while the controller restarts"). One worker is killed with SIGKILL:
#   controller_restart_heal.sh          once both workers have reported since
#                                       the restart;
#   controller_restart_heal.sh outage   while the controller is down (its node
#                                       "dies" unseen, and is never heard again).
# The resumed launch finds that node lost, blames it, and relaunches inside
# the same Slurm job on the spare; the run SUCCEEDS.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec resumed "exec python3 $STEPS_PY" 'spare_nodes = 1' '[restart]' 'max_restarts = 1' \
  '[env]' 'STEPS = "400"' 'STEP_S = "0.1"' 'CKPT_EVERY = "50"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
steps_since() {  # MS: complete steps (all 4 ranks) of launch 1 stored after MS
  sqlite3 "$E2E_DIR/controller.db" \
    "SELECT COUNT(*) FROM steps WHERE run_id='$id' AND launch=1 AND ranks=4 AND updated_ms>$1"
}
deadline=$((SECONDS + 30))
until [ "$(steps_since 0)" -gt 3 ]; do
  [ $SECONDS -lt $deadline ] || fail "launch 1 reported no steps"
  sleep 0.2
done
victim_node=$(json_get "$(run_json "$id")" "d['attempts'][0]['nodes'][1]")
kill_victim() {
  local pid
  pid=$(worker_pid_on "$id" "$victim_node")
  [ -n "$pid" ] || fail "no worker of $id found on $victim_node"
  kill -KILL "$pid"
  log "killed the worker on $victim_node (pid $pid) $1"
}
stop_controller KILL
log "controller killed"
[ "${1:-}" = outage ] && kill_victim "while the controller was down"
sleep 2
restart_ms=$(date +%s%3N)
start_controller
grep -q "run $id: launch 1.1 on .* ran before the restart: watched again" "$E2E_DIR/controller.log" ||
  fail "the controller did not resume launch 1.1 of $id"
if [ "${1:-}" != outage ]; then
  # Both workers' streams are back once steps of all four ranks are stored
  # again (the ranks step on their own, 0.1 s a step: neither is 10 steps ahead).
  deadline=$((SECONDS + 30))
  until [ "$(steps_since "$restart_ms")" -ge 10 ]; do
    [ $SECONDS -lt $deadline ] || fail "no step of launch 1 stored since the restart"
    sleep 0.2
  done
  [ "$(run_state "$id")" = RUNNING ] || fail "$id is $(run_state "$id") after the restart"
  kill_victim "after the restart"
fi

wait_state "$id" SUCCEEDED 120
show=$(expect_node_lost_relaunch "$id" "$victim_node")
json_get "$show" "d['launches'][0]['evidence_json']" | grep >/dev/null '"controller_restarted":true' ||
  fail "launch 1's evidence does not say the controller restarted: $(json_get "$show" "d['launches'][0]")"
nodes2=$(json_get "$show" "','.join(d['launches'][1]['nodes'])")
case ",$nodes2," in *",$victim_node,"*) fail "launch 2 ran on the lost node ($nodes2)" ;; esac
log "PASS: launch 1 resumed after the restart, $victim_node lost, relaunched on $nodes2"
