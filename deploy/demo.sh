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
# Environment: TRELLIS_BUILD_DIR (default build/), TRELLIS_DEMO_DIR (state,
# default build/demo), TRELLIS_DEMO_CLUSTER (the local cluster's directory,
# default /tmp/trellis-demo-cluster), TRELLIS_DEMO_PORT (controller port, default 50151).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TRELLIS_BUILD_DIR:-$REPO/build}
STATE=${TRELLIS_DEMO_DIR:-$BUILD/demo}
PORT=${TRELLIS_DEMO_PORT:-50151}
# Short and outside the build tree: the cluster keeps unix sockets under it.
CLUSTER=${TRELLIS_DEMO_CLUSTER:-/tmp/trellis-demo-cluster}

say() { printf '\n== %s\n' "$*"; }

stop_controller() {
  if [ -f "$STATE/controller.pid" ]; then
    local pid
    pid=$(cat "$STATE/controller.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE/controller.pid"
  fi
}

if [ "${1:-}" = "--down" ]; then
  stop_controller
  "$REPO/deploy/slurm/local-cluster" down "$CLUSTER"
  echo "demo stopped (state kept in $STATE)"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: deploy/demo.sh [--down]" >&2; exit 2; }

say "Installing packages (deploy/setup.sh)"
bash "$REPO/deploy/setup.sh"

say "Building into $BUILD"
cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$BUILD" trellis trellis-controller trellis-worker trellis-corpus

say "Starting a local Slurm cluster (4 nodes) in $CLUSTER"
mkdir -p "$STATE"
"$REPO/deploy/slurm/local-cluster" up "$CLUSTER" --nodes 4 --port-base 17400
# shellcheck disable=SC1091
. "$CLUSTER/env"
sinfo

say "Starting trellis-controller on 127.0.0.1:$PORT"
export TRELLIS_ADDR=127.0.0.1:$PORT
if [ -f "$STATE/controller.pid" ] && kill -0 "$(cat "$STATE/controller.pid")" 2>/dev/null; then
  echo "already running (pid $(cat "$STATE/controller.pid"))"
else
  rm -f "$STATE/controller.port"
  "$BUILD/bin/trellis-controller" --listen "127.0.0.1:$PORT" --port-file "$STATE/controller.port" \
    --db "$STATE/controller.db" --output-root "$STATE/runs" \
    >>"$STATE/controller.log" 2>&1 &
  echo $! >"$STATE/controller.pid"
  for _ in $(seq 100); do [ -s "$STATE/controller.port" ] && break; sleep 0.1; done
  [ -s "$STATE/controller.port" ] || { tail -20 "$STATE/controller.log"; exit 1; }
  echo "pid $(cat "$STATE/controller.pid"), log $STATE/controller.log"
fi

say "Building the training corpus (the text files of /usr/share/common-licenses)"
corpus="$STATE/licenses.corpus"
[ -s "$corpus" ] || "$BUILD/bin/trellis-corpus" build "$corpus" /usr/share/common-licenses
# The example names the corpus by an absolute path on the shared file system.
spec="$STATE/tiny-moe-2x2.toml"
sed "s|^data = .*|data = \"$corpus\"|" "$REPO/examples/tiny-moe-2x2.toml" >"$spec"

say "Submitting examples/tiny-moe-2x2.toml (2 nodes x 2 ranks, 150 steps)"
run=$("$BUILD/bin/trellis" submit "$spec")
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
  $BUILD/bin/trellis submit $spec    # the tiny MoE again
  $BUILD/bin/trellis gate-report $run
Stop everything with: deploy/demo.sh --down
MSG
