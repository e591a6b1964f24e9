#!/usr/bin/env bash
# The README's two commands on one machine, in both orders. A user's demo
# (deploy/demo.sh with the ports a user gets: cluster 17400-17404, controller
# 50151, its metrics 9152; directories of its own) and the suite's demo (the same script with the
# suite's TRELLIS_DEMO_* from tests/CMakeLists.txt, the README's full run) run
# side by side, and stopping either leaves the other up and answering:
#
#   1. the user's demo (a short run), left up as the README leaves it
#   2. the suite's demo while the user's is up
#   3. both answer (sinfo: 4 idle nodes; trellis ls: the run SUCCEEDED), and the
#      user's daemons and controller are the processes they were before 2
#   4. the user's --down; the suite's demo still answers
#   5. the user's demo again while the suite's is up
#   6. the suite's --down; the user's demo still answers, same processes
#   7. the user's --down: nothing of either is left, their ports are free
#
# Exit 77 (skipped) when not root. When a user's ports are taken (most likely
# by your own demo, left up), the suite's demo runs beside whatever holds them,
# the test checks they are still served afterwards, and exits 77: the
# side-by-side half did not run.
set -euo pipefail

REPO=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
DEMO=$REPO/deploy/demo.sh
LC=$REPO/deploy/slurm/local-cluster
T0=$SECONDS

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the local cluster needs root"
  exit 77
fi
: "${TRELLIS_BUILD_DIR:?}" "${TRELLIS_DEMO_DIR:?}" "${TRELLIS_DEMO_CLUSTER:?}"
: "${TRELLIS_DEMO_PORT:?}" "${TRELLIS_DEMO_PORT_BASE:?}"
BIN=$TRELLIS_BUILD_DIR/bin
# Nothing of the caller's shell (a sourced cluster env, a demo's address) leaks in.
unset TRELLIS_DEMO_STEPS TRELLIS_ADDR SLURM_CONF

SUITE_STATE=$TRELLIS_DEMO_DIR
SUITE_CLUSTER=$TRELLIS_DEMO_CLUSTER
SUITE_ADDR=127.0.0.1:$TRELLIS_DEMO_PORT
SUITE_PORTS="$(seq -s ' ' "$TRELLIS_DEMO_PORT_BASE" $((TRELLIS_DEMO_PORT_BASE + 4))) $TRELLIS_DEMO_PORT"
SUITE_PORTS+=" ${TRELLIS_DEMO_METRICS_PORT:?}"
# What a user gets from deploy/demo.sh, except for the directories.
USER_PORT_BASE=17400
USER_PORT=50151
USER_ADDR=127.0.0.1:$USER_PORT
USER_PORTS="$(seq -s ' ' $USER_PORT_BASE $((USER_PORT_BASE + 4))) $USER_PORT 9152"
USER_STATE=$TRELLIS_BUILD_DIR/demo-user-test
USER_CLUSTER=/tmp/trellis-ctest-userdemo

suite_demo() { "$DEMO" "$@"; }
user_demo() {
  env -u TRELLIS_DEMO_PORT -u TRELLIS_DEMO_PORT_BASE -u TRELLIS_DEMO_MASTER_PORT_BASE \
    -u TRELLIS_DEMO_METRICS_PORT \
    TRELLIS_DEMO_DIR="$USER_STATE" TRELLIS_DEMO_CLUSTER="$USER_CLUSTER" TRELLIS_DEMO_STEPS=20 \
    "$DEMO" "$@"
}

phase() { printf '\n######## [%3d s] %s\n' $((SECONDS - T0)) "$*"; }
ok() { echo "  ok: $*"; }
fail() {
  echo "FAIL: $*" >&2
  local s
  for s in "$USER_STATE" "$SUITE_STATE"; do
    [ -f "$s/controller.log" ] || continue
    echo "--- tail of $s/controller.log" >&2
    tail -n 20 "$s/controller.log" >&2
  done
  "$LC" status "$USER_CLUSTER" >&2 || true
  "$LC" status "$SUITE_CLUSTER" >&2 || true
  exit 1
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports_in_use() { local p; for p in "$@"; do if port_in_use "$p"; then echo "$p"; fi; done; }

# Alive: not a zombie (a daemon that exited may wait a while to be reaped).
alive() {
  local st
  st=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# The daemons' and the controller's pids of a demo, one line.
demo_pids() {  # STATE CLUSTER
  cat "$1/controller.pid" "$2"/run/*.pid 2>/dev/null | tr '\n' ' '
}

# answers NAME STATE CLUSTER ADDR: the cluster's 4 nodes are idle (the batch
# job of a run that just SUCCEEDED may still be completing: wait a little),
# and the controller lists runs, the newest SUCCEEDED.
answers() {
  local name=$1 cluster=$3 addr=$4 nodes newest deadline=$((SECONDS + 30))
  while :; do
    nodes=$( (. "$cluster/env" && timeout 20 sinfo -h -N -o '%N %T') ) ||
      fail "$name: sinfo against $cluster failed"
    [ "$(grep -c ' idle$' <<<"$nodes")" = 4 ] && break
    [ $SECONDS -lt $deadline ] || fail "$name: nodes are not 4 idle after 30 s:"$'\n'"$nodes"
    sleep 0.5
  done
  newest=$("$BIN/trellis" --addr "$addr" ls --json |
    python3 -c 'import json, sys; r = json.load(sys.stdin); print(r[0]["run_id"], r[0]["state"])') ||
    fail "$name: trellis ls against $addr failed"
  [ "${newest#* }" = SUCCEEDED ] || fail "$name: the newest run is $newest"
  ok "$name: 4 idle nodes, controller at $addr, $newest"
}

same_pids() {  # NAME BEFORE NOW
  [ "$2" = "$3" ] || fail "$1: processes changed: before '$2', now '$3'"
  local p
  for p in $3; do alive "$p" || fail "$1: pid $p is gone"; done
  ok "$1: the same processes ($3)"
}

cleanup() {
  local rc=$?
  user_demo --down >/dev/null 2>&1 || true
  suite_demo --down >/dev/null 2>&1 || true
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || echo "FAILED (rc=$rc) after $((SECONDS - T0)) s"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Leftovers of an interrupted run of this test go first; a user's own demo
# lives in other directories and is left alone.
user_demo --down >/dev/null || fail "stopping a leftover user demo of this test"
suite_demo --down >/dev/null || fail "stopping a leftover suite demo"
rm -rf "$USER_STATE"

taken=$(ports_in_use $USER_PORTS | tr '\n' ' ')
if [ -n "$taken" ]; then
  phase "ports $taken are taken (a demo of yours left up?): the suite's demo runs beside them"
  suite_demo || fail "the suite's demo failed beside whatever holds ports $taken"
  answers "suite demo" "$SUITE_STATE" "$SUITE_CLUSTER" "$SUITE_ADDR"
  suite_demo --down || fail "the suite's demo --down"
  still=$(ports_in_use $taken | tr '\n' ' ')
  [ "$still" = "$taken" ] || fail "ports $taken were served before the suite's demo, now only $still"
  echo "SKIP: the suite's demo passed beside ports $taken, which are still served; the" \
    "side-by-side test needs them free (deploy/demo.sh --down stops a demo of yours)"
  exit 77
fi
busy=$(ports_in_use $SUITE_PORTS | tr '\n' ' ')
[ -z "$busy" ] || fail "the suite's demo ports $busy are taken (TRELLIS_DEMO_* in tests/CMakeLists.txt)"

phase "1. the user's demo, left up"
user_demo || fail "the user's demo failed"
grep -qx "PORT_BASE=$USER_PORT_BASE" "$USER_CLUSTER/etc/cluster.shape" ||
  fail "the user's cluster is not on port base $USER_PORT_BASE: $(cat "$USER_CLUSTER/etc/cluster.shape")"
[ "$(cat "$USER_STATE/controller.port")" = "$USER_PORT" ] ||
  fail "the user's controller is not on port $USER_PORT"
user_pids=$(demo_pids "$USER_STATE" "$USER_CLUSTER")

phase "2. the suite's demo while the user's is up"
suite_demo || fail "the suite's demo failed while the user's was up"

phase "3. both answer"
answers "user demo" "$USER_STATE" "$USER_CLUSTER" "$USER_ADDR"
answers "suite demo" "$SUITE_STATE" "$SUITE_CLUSTER" "$SUITE_ADDR"
same_pids "user demo" "$user_pids" "$(demo_pids "$USER_STATE" "$USER_CLUSTER")"
suite_pids=$(demo_pids "$SUITE_STATE" "$SUITE_CLUSTER")

phase "4. the user's --down; the suite's demo still answers"
user_demo --down || fail "the user's demo --down"
answers "suite demo" "$SUITE_STATE" "$SUITE_CLUSTER" "$SUITE_ADDR"
same_pids "suite demo" "$suite_pids" "$(demo_pids "$SUITE_STATE" "$SUITE_CLUSTER")"

phase "5. the user's demo again while the suite's is up"
user_demo || fail "the user's demo failed while the suite's was up"
answers "user demo" "$USER_STATE" "$USER_CLUSTER" "$USER_ADDR"
user_pids=$(demo_pids "$USER_STATE" "$USER_CLUSTER")

phase "6. the suite's --down; the user's demo still answers"
suite_demo --down || fail "the suite's demo --down"
answers "user demo" "$USER_STATE" "$USER_CLUSTER" "$USER_ADDR"
same_pids "user demo" "$user_pids" "$(demo_pids "$USER_STATE" "$USER_CLUSTER")"

phase "7. the user's --down: nothing of either is left"
user_demo --down || fail "the user's demo --down"
for c in "$USER_CLUSTER" "$SUITE_CLUSTER"; do
  if "$LC" status "$c" >/dev/null; then fail "$c is still up"; fi
done
busy=$(ports_in_use $USER_PORTS $SUITE_PORTS | tr '\n' ' ')
[ -z "$busy" ] || fail "ports still served after both --down: $busy"
for p in $user_pids $suite_pids; do
  if alive "$p"; then fail "pid $p of a stopped demo still runs"; fi
done
ok "both stopped, ports $USER_PORTS $SUITE_PORTS free"

echo "PASS: the user's and the suite's demos side by side in $((SECONDS - T0)) s"
