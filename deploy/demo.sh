#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a watched Trellis run:
# installs the packages, builds, starts a local 4-node Slurm cluster and the
# controller, builds a small text corpus, submits examples/tiny-moe-2x2.toml (a
# tiny MoE trained by the workers' own trainer on 2 nodes x 2 ranks), follows
# its falling loss to SUCCEEDED and prints its history.
#
#   deploy/demo.sh          # everything above; leaves cluster and controller up
#   deploy/demo.sh --down   # stops the controller and the cluster
#
# Environment (the defaults are a user's; the test suite gives its own, so that
# its demo runs beside yours):
#   TRELLIS_BUILD_DIR       build tree (default build/)
#   TRELLIS_DEMO_DIR        state: database, runs, corpus, log (default build/demo)
#   TRELLIS_DEMO_CLUSTER    the local cluster's directory (default /tmp/trellis-demo-cluster)
#   TRELLIS_DEMO_PORT_BASE  the cluster's ports: slurmctld on it, nodeK's slurmd
#                           on it + K (default 17400)
#   TRELLIS_DEMO_PORT       controller port (default 50151)
#   TRELLIS_DEMO_METRICS_PORT  the controller's /metrics port (default 9152)
#   TRELLIS_DEMO_MASTER_PORT_BASE  first rendezvous port of the ranks (default
#                           the controller's, 29500; an offset below 2000 is added)
#   TRELLIS_DEMO_STEPS      training steps (default the example's, 150)
# --down needs only TRELLIS_DEMO_DIR and TRELLIS_DEMO_CLUSTER.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TRELLIS_BUILD_DIR:-$REPO/build}
STATE=${TRELLIS_DEMO_DIR:-$BUILD/demo}
PORT=${TRELLIS_DEMO_PORT:-50151}
METRICS_PORT=${TRELLIS_DEMO_METRICS_PORT:-9152}
PORT_BASE=${TRELLIS_DEMO_PORT_BASE:-17400}
MASTER_PORT_BASE=${TRELLIS_DEMO_MASTER_PORT_BASE:-}
EXAMPLE=$REPO/examples/tiny-moe-2x2.toml
STEPS=${TRELLIS_DEMO_STEPS:-$(sed -n 's/^steps = \([0-9]*\).*/\1/p' "$EXAMPLE")}
# Short and outside the build tree: the cluster keeps unix sockets under it.
CLUSTER=${TRELLIS_DEMO_CLUSTER:-/tmp/trellis-demo-cluster}
# Absolute, so that the controller's command line names its database the same
# way whatever directory a later --down runs from.
case "$STATE" in /*) ;; *) STATE=$PWD/$STATE;; esac
LOCAL_CLUSTER=$REPO/deploy/slurm/local-cluster

say() { printf '\n== %s\n' "$*"; }
die() { echo "demo: error: $*" >&2; exit 1; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The pid of this demo's controller, if it runs: the pid file alone could name
# a process that reused the pid.
controller_pid() {
  local pid
  pid=$(cat "$STATE/controller.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -xF >/dev/null -- "$STATE/controller.db" || return 1
  echo "$pid"
}

stop_controller() {
  local pid
  if pid=$(controller_pid); then
    kill -TERM "$pid"
    # (A zombie has no command line: gone, whether or not it is reaped yet.)
    for _ in $(seq 50); do controller_pid >/dev/null || break; sleep 0.1; done
    if controller_pid >/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$STATE/controller.pid"
}

if [ "${1:-}" = "--down" ]; then
  stop_controller
  "$LOCAL_CLUSTER" down "$CLUSTER"
  echo "demo stopped (state kept in $STATE)"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: deploy/demo.sh [--down]" >&2; exit 2; }
for v in PORT METRICS_PORT PORT_BASE STEPS ${MASTER_PORT_BASE:+MASTER_PORT_BASE}; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "TRELLIS_DEMO_$v must be a positive integer, got '${!v}'"
done

say "Installing packages (deploy/setup.sh)"
bash "$REPO/deploy/setup.sh"

say "Building into $BUILD"
cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$BUILD" trellis trellis-controller trellis-worker trellis-rank trellis-corpus

BESIDE="stop that one (deploy/demo.sh --down, with its TRELLIS_DEMO_* settings), or run this one
beside it with TRELLIS_DEMO_PORT_BASE=P (ports P..P+4 free, below 32768) and a TRELLIS_DEMO_PORT,
TRELLIS_DEMO_METRICS_PORT, TRELLIS_DEMO_CLUSTER and TRELLIS_DEMO_DIR of its own"
if ! controller_pid >/dev/null && port_in_use "$PORT"; then
  die "port $PORT, the controller's, is in use (another demo?): $BESIDE"
fi

say "Starting a local Slurm cluster (4 nodes) in $CLUSTER"
mkdir -p "$STATE"
"$LOCAL_CLUSTER" up "$CLUSTER" --nodes 4 --port-base "$PORT_BASE" ||
  die "the local cluster did not start. If a port was in use (another demo?): $BESIDE"
# shellcheck disable=SC1091
. "$CLUSTER/env"
sinfo

say "Starting trellis-controller on $STATE/ctl/controller.sock (workers: 127.0.0.1:$PORT)"
# The CLI meets this demo's controller on its own socket, in a directory only
# this user may enter (a second demo beside it has its own).
export TRELLIS_ADDR=unix:$STATE/ctl/controller.sock
if pid=$(controller_pid); then
  echo "already running (pid $pid)"
else
  rm -f "$STATE/controller.port"
  "$BUILD/bin/trellis-controller" --listen "127.0.0.1:$PORT" --port-file "$STATE/controller.port" \
    --socket "$STATE/ctl/controller.sock" \
    --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --db "$STATE/controller.db" --output-root "$STATE/runs" --data-root "$STATE" \
    ${MASTER_PORT_BASE:+--master-port-base "$MASTER_PORT_BASE"} \
    >>"$STATE/controller.log" 2>&1 &
  echo $! >"$STATE/controller.pid"
  for _ in $(seq 100); do [ -s "$STATE/controller.port" ] && break; sleep 0.1; done
  [ -s "$STATE/controller.port" ] || { tail -20 "$STATE/controller.log"; exit 1; }
  echo "pid $(cat "$STATE/controller.pid"), log $STATE/controller.log"
fi

say "Building the training corpus (the text files of /usr/share/common-licenses)"
corpus="$STATE/licenses.corpus"
[ -s "$corpus" ] || "$BUILD/bin/trellis-corpus" build "$corpus" /usr/share/common-licenses
# The example names its corpus "licenses.corpus": the controller finds it under
# its data root ($STATE, --data-root above). The file is submitted as shipped.

say "Submitting examples/tiny-moe-2x2.toml (2 nodes x 2 ranks, $STEPS steps)"
run=$("$BUILD/bin/trellis" submit "$EXAMPLE" "training.steps=$STEPS")
echo "run id: $run"

say "Watching $run"
status=0
"$BUILD/bin/trellis" watch "$run" || status=$?

say "History of $run"
"$BUILD/bin/trellis" show "$run"

say "Rank output"
"$BUILD/bin/trellis" logs "$run"

if [ $status -ne 0 ]; then
  echo "the run did not succeed (watch exited $status); controller log: $STATE/controller.log" >&2
  exit 1
fi
cat <<MSG

Done: $run SUCCEEDED. Try:
  export TRELLIS_ADDR=$TRELLIS_ADDR
  $BUILD/bin/trellis ls
  $BUILD/bin/trellis submit examples/hello.toml && $BUILD/bin/trellis watch <id>
  $BUILD/bin/trellis submit examples/tiny-moe-2x2.toml training.steps=300   # longer
  $BUILD/bin/trellis gate-report $run
Stop everything with: deploy/demo.sh --down
MSG
