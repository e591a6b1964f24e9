#!/usr/bin/env bash
# Certified return (docs/architecture.md, "Quarantine") on a real 3-node
# Slurm cluster of its own (ports 17000-17149): node3's sysfs NUMA tree is
# gone, so the gate strikes it; when its quarantine (15 s) expires it is
# "checking", and its check job (trellis-worker check --certify, on node3)
# fails while the fault persists: a second strike, 30 s out, shown in
# `trellis nodes`. A run submitted meanwhile excludes it. With the tree back
# the next check passes, the node is on probation, and a 3-node run uses it.
# Needs root (the cluster), slurm-wlm and munge.
set -euo pipefail
: "${TRELLIS_BIN:?set TRELLIS_BIN to the bin directory of a build}"
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
LC="$ROOT/deploy/slurm/local-cluster"
[ "$(id -u)" = 0 ] || { echo "SKIP: the local cluster needs root"; exit 77; }

CL=$(mktemp -d "${TMPDIR:-/tmp}/certify-test.XXXXXX")
PB=$((17000 + ($$ % 15) * 10))
"$LC" up "$CL/cluster" --nodes 3 --port-base "$PB" >"$CL/up.log" 2>&1 ||
  { cat "$CL/up.log"; "$LC" down "$CL/cluster" >/dev/null 2>&1 || true; exit 1; }
export TRELLIS_TEST_CLUSTER="$CL/cluster"
# shellcheck source=../e2e/lib.sh
. "$ROOT/tests/e2e/lib.sh"
SYSFS="$TRELLIS_TEST_CLUSTER/nodes/node3/sysfs"
trap 'cleanup; "$LC" down "$CL/cluster" >/dev/null 2>&1 || true; rm -rf "$CL"' EXIT

nodes_json() { trellis nodes --json >"$E2E_DIR/nodes.json"; echo "$E2E_DIR/nodes.json"; }
node3() {  # PYTHON_EXPR with n bound to node3's entry
  json_get "$(nodes_json)" "next(($1) for n in d if n['name'] == 'node3')"
}
wait_node3() {  # PYTHON_EXPR TIMEOUT_S WHAT: until EXPR holds of node3's entry
  local deadline=$((SECONDS + $2))
  until [ "$(node3 "$1")" = True ]; do
    [ $SECONDS -lt $deadline ] || { trellis nodes >&2; fail "node3: not $3 within $2 s"; }
    sleep 1
  done
  log "node3 $3: $(node3 "n['state'], n['strikes'], n['last_check']")"
}

mv "$SYSFS" "$SYSFS.away"
start_controller --quarantine-s 15 --probation-s 3600 --certify-timeout-s 90 \
  --certify-touch-gib 0.05

# The gate strikes node3 (its probe fails); the run trains on node1, node2.
spec=$(write_spec spare 'echo "rank $RANK on $SLURMD_NODENAME"' 'spare_nodes = 1' \
  'nodelist = "node[1-3]"' '[gate]' 'timeout_s = 60')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" SUCCEEDED 120
[ "$(node3 "n['state'] == 'quarantined' and n['strikes'] == 1 and n['actor'].startswith('gate')")" \
  = True ] ||
  fail "node3 not struck by the gate: $(cat "$E2E_DIR/nodes.json")"

# Its quarantine expires, the check fails while the fault persists: doubled.
wait_node3 "n['strikes'] == 2 and (n['last_check'] or {}).get('state') == 'failed'" 90 \
  "failed its check"
[ "$(node3 "n['actor'], n['state'], (n['expiry_unix_ms'] - n['since_unix_ms']) // 1000")" = \
  "('certify', 'quarantined', 30)" ] || fail "not a doubled strike: $(cat "$E2E_DIR/nodes.json")"
node3 "n['last_check']['summary']" | grep >/dev/null "certify: FAILED: numa" ||
  fail "the check's summary does not name numa: $(node3 "n['last_check']")"
trellis nodes

# While it is out a run never gets it.
out=$(trellis submit "$(write_spec out 'true' '[gate]' 'timeout_s = 60')") || fail "submit failed"
wait_state "$out" SUCCEEDED 120
show=$(run_json "$out")
args=$(json_get "$show" "' '.join(d['attempts'][0]['sbatch_args'])")
echo "$args" | grep >/dev/null -- "--exclude=node3" || fail "$out does not exclude node3: $args"
nodes=$(json_get "$show" "','.join(d['attempts'][0]['nodes'])")
case "$nodes" in *node3*) fail "$out ran on node3 while it was out" ;; esac

# The fault removed: the next check passes, the node is on probation, strikes kept.
mv "$SYSFS.away" "$SYSFS"
wait_node3 "n['state'] == 'probation' and n['last_check']['state'] == 'passed'" 120 \
  "passed its check"
[ "$(node3 "n['strikes']")" = 2 ] || fail "strikes not kept on probation"
node3 "n['last_check']['summary']" | grep >/dev/null "certify: passed" ||
  fail "the pass's summary: $(node3 "n['last_check']")"
trellis nodes

# A run submitted afterwards may use it: three nodes need node3.
cat >"$E2E_DIR/all.toml" <<'TOML'
[job]
name = "all"
command = "true"
[slurm]
nodes = 3
ranks_per_node = 1
[gate]
timeout_s = 60
TOML
all=$(trellis submit "$E2E_DIR/all.toml") || fail "submit failed"
wait_state "$all" SUCCEEDED 120
nodes=$(json_get "$(run_json "$all")" "','.join(d['attempts'][0]['nodes'])")
[ "$nodes" = "node1,node2,node3" ] || fail "$all ran on '$nodes'"
log "PASS: node3 struck by the gate, failed its check (2 strikes, 30 s), kept out of $out," \
  "passed once fixed, and $all ran on $nodes"
