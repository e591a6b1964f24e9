#!/usr/bin/env bash
# A rank that stops (SIGSTOP) hangs its launch. The controller notices within
# hang_timeout_s + 10 s, stops the launch's srun step and leaves no rank
# process behind; with no restart left the run ends FAILED naming the hang.
# With a spare and a restart, the same hang is relaunched inside the same
# Slurm job, on the nodes left once the hung rank's node is struck.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"
HANG_S=10

rank_pid() {  # RUN_DIR LAUNCH RANK: the rank's pid, from the first line it logs
  local log="$1/attempt-1/launch-$2/rank-$3.log" deadline=$((SECONDS + 60))
  until grep -q "pid" "$log" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "rank $3 of launch $2 logged no pid in $log"
    sleep 0.2
  done
  grep -o "pid [0-9]*" "$log" | head -1 | cut -d' ' -f2
}

run_processes() {  # ID: pids of processes still running for the run
  local p
  for p in $(grep -l "TRELLIS_RUN=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    if is_our_rank "$p"; then echo "$p"; fi
  done
}

stop_rank_1() {  # ID -> "pid stop_ms"
  local run_dir
  run_dir=$(json_get "$(run_json "$1")" "d['run_dir']")
  wait_state "$1" RUNNING 60 >&2
  local pid
  pid=$(rank_pid "$run_dir" 1 1)
  sleep 1  # a few steps first: the hang is "no step after step N"
  kill -STOP "$pid"
  echo "$pid $(date +%s%3N)"
}

start_controller

# 1. No restart left: FAILED, naming the hang, nothing left running.
spec=$(write_spec hang "exec python3 $STEPS_PY" '[restart]' "hang_timeout_s = $HANG_S" \
  'max_restarts = 0' '[env]' 'STEPS = "1000"')
id=$(trellis submit "$spec") || fail "submit failed"
read -r pid stop_ms < <(stop_rank_1 "$id")
log "rank 1 (pid $pid) stopped"
wait_state "$id" FAILED $((HANG_S + 60))
show=$(run_json "$id")
[ "$(json_get "$show" "d['launches'][0]['failure_class']")" = hang ] ||
  fail "launch 1 is not classed a hang: $(json_get "$show" "d['launches']")"
hang_ms=$(json_get "$show" "[e['unix_ms'] for e in d['health_events'] if e['kind']=='hang' and e['rank']==1][0]")
detect_s=$(( (hang_ms - stop_ms) / 1000 ))
[ "$detect_s" -le $((HANG_S + 10)) ] || fail "hang detected after $detect_s s (> $HANG_S + 10)"
node=$(json_get "$show" "d['launches'][0]['blamed_node']")
[ -n "$node" ] || fail "no node blamed for the hang"
reason=$(json_get "$show" "d['state_reason']")
echo "$reason" | grep >/dev/null "rank 1 on $node hung" || fail "reason '$reason' does not name the hung rank"
deadline=$((SECONDS + 30))
while [ -n "$(run_processes "$id")" ]; do
  [ $SECONDS -lt $deadline ] || fail "processes of $id left: $(run_processes "$id")"
  sleep 0.5
done
log "PASS: hang detected $detect_s s after SIGSTOP; $node blamed; no process left"
trellis release "$node" >/dev/null || fail "release of $node failed"

# 2. A spare and a restart: relaunch 2 in the same Slurm job, without the hung node.
spec=$(write_spec hang-spare "exec python3 $STEPS_PY" 'spare_nodes = 1' '[restart]' \
  "hang_timeout_s = $HANG_S" 'max_restarts = 1' '[env]' 'STEPS = "40"')
id=$(trellis submit "$spec") || fail "submit failed"
read -r pid stop_ms < <(stop_rank_1 "$id")
wait_state "$id" SUCCEEDED $((HANG_S + 120))
show=$(run_json "$id")
[ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "expected one attempt (one Slurm job)"
[ "$(json_get "$show" "[l['recovery'] for l in d['launches']]")" = "['relaunch', 'succeed']" ] ||
  fail "launches: $(json_get "$show" "d['launches']")"
blamed=$(json_get "$show" "d['launches'][0]['blamed_node']")
nodes2=$(json_get "$show" "','.join(d['launches'][1]['nodes'])")
case ",$nodes2," in *",$blamed,"*) fail "launch 2 ran on the blamed node $blamed ($nodes2)" ;; esac
[ "$(json_get "$show" "d['relaunches']")" = 1 ] || fail "relaunches is not 1"
trellis release "$blamed" >/dev/null || true
log "PASS: $id relaunched on $nodes2 after the hang on $blamed"
