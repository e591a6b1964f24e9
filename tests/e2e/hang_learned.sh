#!/usr/bin/env bash
# Learned hang timeouts (docs/architecture.md, "Hangs: learned timeouts") on
# the example model, whose steps take a fraction of a second here:
# 1. Three checkpoints pass with no hang (the step before each is allowed
#    twice the longest one timed; the first, none timed yet, the spec's 600 s),
#    and `trellis show` prints the learned timeout.
# 2. Rank 1 is stopped (SIGSTOP): the hang is found within the learned
#    timeout and 4 s (the check's second, the records' way), under 10 s when
#    the steps take 0.2-0.5 s as here unloaded (the spec says 600 s). Every rank waits in the step's collectives, at the same
#    step; its worker says rank 1's process is stopped, so rank 1's node is
#    blamed, and the launch relaunched on the spare from its checkpoint.
# 3. The relaunch starts with no false hang (its start-up timeout learned from
#    launch 1's start) and trains on.
# Prints hang_detect_ms=N.
. "$(dirname "$0")/lib.sh"
[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: no trellis-corpus"; exit 77; }

launch_steps() {  # ID LAUNCH: the launch's steps stored with all 4 ranks
  sqlite3 "$E2E_DIR/controller.db" \
    "SELECT COUNT(*) FROM steps WHERE run_id='$1' AND launch=$2 AND ranks=4"
}
hangs() { json_get "$(run_json "$1")" "len([e for e in d['health_events'] if e['kind']=='hang'])"; }

start_controller
spec=$(tiny_moe_spec -e 's/^steps = .*/steps = 100000/' -e 's/^every_steps = .*/every_steps = 40/' \
  -e 's/^time_limit = .*/time_limit = 30/' \
  -e 's/^ranks_per_node = 2$/ranks_per_node = 2\nspare_nodes = 1/')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 120
wait_complete_steps "$id" 130 180
[ "$(hangs "$id")" = 0 ] ||
  fail "a hang across the checkpoints: $(json_get "$(run_json "$id")" "d['health_events']")"
text=$(trellis show "$id") || fail "show failed"
line=$(echo "$text" | grep "^hang after") || fail "show prints no hang timeout:
$text"
echo "$line" | grep -q "learned" || fail "the timeout is not learned after 130 steps: $line"
step_s=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT ROUND(AVG(step_seconds_max), 3) FROM steps WHERE run_id='$id' AND ranks=4")
log "130 steps, 3 checkpoints, no hang; $line"

read -r pid stopped_node < <(our_rank_pid_node "$id" 1 1)
kill -STOP "$pid"
stop_ms=$(date +%s%3N)
log "rank 1 (pid $pid) stopped"
deadline=$((SECONDS + 60))
until [ "$(hangs "$id")" -ge 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "no hang found 60 s after SIGSTOP"
  sleep 0.2
done
show=$(run_json "$id")
hang_ms=$(json_get "$show" "[e['unix_ms'] for e in d['health_events'] if e['kind']=='hang'][0]")
detail=$(json_get "$show" "[e['detail'] for e in d['health_events'] if e['kind']=='hang'][0]")
detect_ms=$((hang_ms - stop_ms))
# The timeout the hung rank was held to (learned: it moves with the steps up to the stop).
timeout_ms=$(json_get "$show" "[int(json.loads(e['detail_json'])['timeout_s'] * 1000) \
  for e in d['health_events'] if e['kind']=='hang'][0]")
echo "$detail" | grep -q "timeout learned" || fail "the hang's timeout was not learned: $detail"
[ "$detect_ms" -lt $((timeout_ms + 4000)) ] ||
  fail "hang found $detect_ms ms after SIGSTOP, the learned timeout $timeout_ms ms: $detail"
log "hang found $detect_ms ms after SIGSTOP: $detail"
kill -CONT "$pid" 2>/dev/null || true

# 3. The relaunch: launch 2 trains, with no hang at its start.
deadline=$((SECONDS + 180))
until [ "$(json_get "$(run_json "$id")" "len(d['launches'])")" -ge 2 ] &&
      [ "$(launch_steps "$id" 2)" -gt 20 ]; do
  [ $SECONDS -lt $deadline ] ||
    fail "launch 2 did not train 20 steps: $(json_get "$(run_json "$id")" "d['launches']")"
  sleep 0.5
done
show=$(run_json "$id")
l1() { json_get "$show" "d['launches'][0]['$1']"; }
[ "$(l1 failure_class)" = hang ] || fail "launch 1 is not a hang: $(l1 reason)"
[ "$(l1 blamed_node)" = "$stopped_node" ] ||
  fail "launch 1 blamed '$(l1 blamed_node)', not rank 1's node $stopped_node: $(l1 reason)"
l1 reason | grep -q "rank 1 on $stopped_node hung.*(its process was stopped)" ||
  fail "launch 1's reason: $(l1 reason)"
[ "$(l1 recovery)" = relaunch ] || fail "launch 1 was not relaunched on the spare: $(l1 recovery)"
[ "$(hangs "$id")" = 1 ] ||
  fail "a false hang in launch 2: $(json_get "$show" "d['health_events']")"
started=$(json_get "$show" "[e['detail'] for e in d['health_events'] if e['kind']=='started']")
log "launch 2 trains; starts: $started"
trellis cancel "$id" >/dev/null || fail "cancel failed"
wait_state "$id" CANCELLED 60
blamed=$(json_get "$show" "d['launches'][0]['blamed_node']")
trellis release "$blamed" >/dev/null || true
log "PASS: hang found in $detect_ms ms (steps of ${step_s} s), no false hang across" \
  "3 checkpoints and 2 starts"
echo "hang_detect_ms=$detect_ms"
