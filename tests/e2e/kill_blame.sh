#!/usr/bin/env bash
# Blame that needs evidence (controller/core/failure_class.h): a rank SIGKILLed
# with no OOM kill on its node (a user's kill, a site's watchdog) blames no
# node; the launch is relaunched in place, on the same nodes, and its evidence
# marks the lone kill. The same again on the same node is the second signal:
# the node is blamed and quarantined, and the run moves to a new Slurm job.
. "$(dirname "$0")/lib.sh"
[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: no trellis-corpus"; exit 77; }

launch_steps() {  # ID ATTEMPT LAUNCH: the launch's steps stored with all 4 ranks
  sqlite3 "$E2E_DIR/controller.db" \
    "SELECT COUNT(*) FROM steps WHERE run_id='$1' AND attempt=$2 AND launch=$3 AND ranks=4"
}
wait_launch_steps() {  # ID ATTEMPT LAUNCH MORE_THAN
  local deadline=$((SECONDS + 180))
  until [ "$(launch_steps "$1" "$2" "$3")" -gt "$4" ]; do
    [ $SECONDS -lt $deadline ] || fail "launch $2.$3 of $1 did not train $4 steps"
    sleep 0.3
  done
}
launches() {  # ID: its launches that ended
  json_get "$(run_json "$1")" "len([l for l in d['launches'] if l['failure_class']])"
}
wait_launches() {  # ID N: until N launches ended
  local deadline=$((SECONDS + 120))
  until [ "$(launches "$1")" -ge "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "launch $2 of $1 never settled"
    sleep 0.3
  done
}

start_controller
spec=$(tiny_moe_spec -e 's/^steps = .*/steps = 100000/' -e 's/^every_steps = .*/every_steps = 20/' \
  -e 's/^max_restarts = .*/max_restarts = 3/' -e 's/^time_limit = .*/time_limit = 30/')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 120
wait_launch_steps "$id" 1 1 25

# 1. A lone kill: nobody blamed, relaunched in place.
read -r pid node < <(our_rank_pid_node "$id" 1 1)
kill -KILL "$pid"
log "rank 1 (pid $pid) on $node killed"
wait_launches "$id" 1
show=$(run_json "$id")
l1() { json_get "$show" "d['launches'][0]['$1']"; }
[ "$(l1 failure_class)" = signal ] || fail "launch 1: $(json_get "$show" "d['launches'][0]")"
[ -z "$(l1 blamed_node)" ] || fail "launch 1 blamed $(l1 blamed_node): $(l1 reason)"
[ "$(l1 recovery)" = relaunch ] || fail "launch 1 was not relaunched in place: $(l1 recovery)"
json_get "$show" "d['launches'][0]['evidence']" | grep -q "'lone_kill': True" ||
  fail "launch 1's evidence has no lone_kill: $(json_get "$show" "d['launches'][0]['evidence']")"
log "launch 1: $(l1 reason)"
trellis nodes --json >"$E2E_DIR/nodes.json" || fail "nodes failed"
[ "$(json_get "$E2E_DIR/nodes.json" "len([n for n in d if n['state']=='quarantined'])")" = 0 ] ||
  fail "a node was quarantined for a lone kill: $(cat "$E2E_DIR/nodes.json")"
wait_launch_steps "$id" 1 2 5
[ "$(json_get "$(run_json "$id")" "len(d['attempts'])")" = 1 ] ||
  fail "the lone kill took a new job"

# 2. The same node again: the second signal.
read -r pid node2 < <(our_rank_pid_node "$id" 2 1)
[ "$node2" = "$node" ] || fail "rank 1 moved from $node to $node2 in place"
kill -KILL "$pid"
log "rank 1 (pid $pid) on $node killed again"
wait_launches "$id" 2
show=$(run_json "$id")
l2() { json_get "$show" "d['launches'][1]['$1']"; }
[ "$(l2 blamed_node)" = "$node" ] || fail "launch 2 blamed '$(l2 blamed_node)': $(l2 reason)"
l2 reason | grep -q "second lone SIGKILL" || fail "launch 2's reason: $(l2 reason)"
trellis nodes --json >"$E2E_DIR/nodes.json" || fail "nodes failed"
json_get "$E2E_DIR/nodes.json" "[n['name'] for n in d if n['state']=='quarantined']" |
  grep -q "$node" || fail "$node is not quarantined: $(cat "$E2E_DIR/nodes.json")"
log "launch 2: $(l2 reason); recovery $(l2 recovery)"
trellis cancel "$id" >/dev/null || fail "cancel failed"
wait_state "$id" CANCELLED 60
trellis release "$node" >/dev/null || true
log "PASS: a lone kill relaunched in place with no blame; the second on $node blamed and" \
  "quarantined it"
