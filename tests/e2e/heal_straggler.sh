#!/usr/bin/env bash
# One rank 3x slower per step than the others: a straggler event names that
# rank and its node; no other rank gets one; the run is not stopped.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec slow "exec python3 $STEPS_PY" '[health]' 'straggler_window = 6' \
  'straggler_min_slow = 4' '[env]' 'STEPS = "12"' 'STEP_S = "0.1"' 'SLOW_RANK = "2"' 'SLOW_FACTOR = "3"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" SUCCEEDED 90
show=$(run_json "$id")
ranks=$(json_get "$show" "sorted({e['rank'] for e in d['health_events'] if e['kind']=='straggler'})")
[ "$ranks" = "[2]" ] || fail "straggler events for ranks $ranks, expected [2]: $(json_get "$show" "d['health_events']")"
node=$(json_get "$show" "[e['node'] for e in d['health_events'] if e['kind']=='straggler'][0]")
[ "$node" = "$(json_get "$show" "d['attempts'][0]['nodes'][1]")" ] || fail "event names node $node"
log "PASS: $(json_get "$show" "[e['detail'] for e in d['health_events'] if e['kind']=='straggler'][0]")"
