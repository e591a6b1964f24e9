#!/usr/bin/env bash
# The launch gate on the real local cluster: node3 starts with one socket at
# 72.7 GiB free (min 100). A run of 2 nodes + 1 spare pinned to node[1-3]
# trains on the two healthy nodes; node3 is quarantined with the figure in the
# reason; the next submission excludes it.
. "$(dirname "$0")/lib.sh"
use_clean_cluster
"$CLUSTER_CTL" fixture "$TRELLIS_TEST_CLUSTER" node3 gh200-short >/dev/null

start_controller
spec=$(write_spec spare 'echo "rank $RANK on $SLURMD_NODENAME"; sleep 1' \
  'spare_nodes = 1' 'nodelist = "node[1-3]"' '[gate]' 'min_free_gib_per_socket = 100.0' 'timeout_s = 60')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" SUCCEEDED 120
show=$(run_json "$id")
nodes=$(json_get "$show" "','.join(d['attempts'][0]['nodes'])")
[ "$nodes" = "node1,node2" ] || fail "trained on '$nodes', expected node1,node2"

trellis nodes --json >"$E2E_DIR/nodes.json"
[ "$(json_get "$E2E_DIR/nodes.json" "[n['name'] for n in d if n['state']=='quarantined']")" = "['node3']" ] ||
  fail "node3 is not the one quarantined node: $(cat "$E2E_DIR/nodes.json")"
reason=$(json_get "$E2E_DIR/nodes.json" "d[0]['reason']")
echo "$reason" | grep >/dev/null "socket 0: 72.7 GiB free < 100.0 GiB required" ||
  fail "quarantine reason lacks the figure: $reason"
report=$(trellis gate-report "$id") || fail "gate-report failed"
echo "$report" | grep >/dev/null "node3 *fail" || fail "gate report does not show node3 failing: $report"

# The next submission keeps node3 out.
next=$(trellis submit "$(write_spec next 'true' '[gate]' 'timeout_s = 60')") || fail "submit failed"
wait_state "$next" SUCCEEDED 120
args=$(json_get "$(run_json "$next")" "' '.join(d['attempts'][0]['sbatch_args'])")
echo "$args" | grep >/dev/null -- "--exclude=node3" || fail "next submission does not exclude node3: $args"
log "PASS: $id trained on $nodes; node3 quarantined ($reason); $next excluded it"
