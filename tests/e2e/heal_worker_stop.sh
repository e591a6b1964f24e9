#!/usr/bin/env bash
# A worker that stops answering (SIGSTOP: a hung node) goes silent: after
# restart.heartbeat_timeout_s its node is lost, the launch's srun step is
# signalled, the node is struck and the run is relaunched on the spare in
# the same Slurm job, and it SUCCEEDS.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"
BEAT_S=5

start_controller
spec=$(write_spec silent "exec python3 $STEPS_PY" 'spare_nodes = 1' '[restart]' 'max_restarts = 1' \
  "heartbeat_timeout_s = $BEAT_S" '[env]' 'STEPS = "60"' 'STEP_S = "0.1"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
victim_node=$(json_get "$(run_json "$id")" "d['attempts'][0]['nodes'][1]")
pid=$(worker_pid_on "$id" "$victim_node")
[ -n "$pid" ] || fail "no worker of $id found on $victim_node"
stop_ms=$(date +%s%3N)
kill -STOP "$pid"
log "stopped the worker on $victim_node (pid $pid)"

wait_state "$id" SUCCEEDED 120
show=$(expect_node_lost_relaunch "$id" "$victim_node")
lost_ms=$(json_get "$show" "[e['unix_ms'] for e in d['health_events'] if e['kind']=='node_lost'][0]")
detect_s=$(( (lost_ms - stop_ms) / 1000 ))
[ "$detect_s" -le $((BEAT_S + 10)) ] || fail "node lost after $detect_s s (heartbeat_timeout_s $BEAT_S)"
kill -0 "$pid" 2>/dev/null && fail "the stopped worker $pid is still there"
log "PASS: $victim_node lost $detect_s s after its worker stopped; relaunched on $(json_get "$show" "','.join(d['launches'][1]['nodes'])")"
