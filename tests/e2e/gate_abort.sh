#!/usr/bin/env bash
# A run needing all 4 nodes while node3 is short: the gate aborts, node3 is
# quarantined, and the run waits QUEUED ("needs 4 nodes, 3 eligible") instead
# of looping; once node3 is healthy and released, the run proceeds.
. "$(dirname "$0")/lib.sh"
use_clean_cluster
"$CLUSTER_CTL" fixture "$TRELLIS_TEST_CLUSTER" node3 gh200-short >/dev/null

start_controller
spec=$(write_spec wide 'sleep 1' '[gate]' 'timeout_s = 60')
sed -i 's/^nodes = 2$/nodes = 4/; s/^ranks_per_node = 2$/ranks_per_node = 1/' "$spec"
id=$(trellis submit "$spec") || fail "submit failed"

deadline=$((SECONDS + 90))
until [ "$(json_get "$(run_json "$id")" "d['state_reason']")" = "needs 4 nodes, 3 eligible" ]; do
  [ $SECONDS -lt $deadline ] || fail "run $id never waited for nodes: $(trellis show "$id")"
  sleep 0.3
done
show=$(run_json "$id")
[ "$(json_get "$show" "d['state']")" = QUEUED ] || fail "run is not QUEUED"
[ "$(json_get "$show" "d['attempts'][0]['exit_code']")" = 75 ] || fail "attempt 1 did not end as an abort"
# Not a loop: across many scheduler ticks (200 ms each) no new attempt starts.
for _ in $(seq 10); do
  sleep 0.3
  [ "$(json_get "$(run_json "$id")" "len(d['attempts'])")" = 1 ] || fail "a new attempt started"
done
trellis nodes | grep >/dev/null "node3 *quarantined" || fail "node3 not quarantined: $(trellis nodes)"

"$CLUSTER_CTL" fixture "$TRELLIS_TEST_CLUSTER" node3 --reset >/dev/null
trellis release node3 || fail "release failed"
wait_state "$id" SUCCEEDED 120
report=$(trellis gate-report "$id" --json)
decisions=$(echo "$report" | python3 -c 'import json,sys; print(",".join(g["decision"] for g in json.load(sys.stdin)["gates"]))')
[ "$decisions" = "ABORT,GO" ] || fail "gate decisions were '$decisions', expected ABORT,GO"
# A name Slurm does not know is refused; a released node can be forgotten altogether.
out=$(trellis quarantine node99 --reason "typo" 2>&1) && fail "node99 was quarantined"
echo "$out" | grep -F >/dev/null "node: 'node99' is not a node of this cluster (sinfo: node1, node2, node3, node4)" ||
  fail "unclear refusal of node99: $out"
trellis release node3 --forget | grep -F >/dev/null "node3 forgotten" || fail "release --forget failed"
[ -z "$(trellis nodes | grep node3)" ] || fail "node3 still listed: $(trellis nodes)"
log "PASS: $id aborted, waited for nodes, and succeeded after node3's release"
