# Helpers for the end-to-end tests: a real controller (own database and
# output root) against the shared local Slurm cluster, driven through the CLI.
set -euo pipefail
# A command that stops a script under set -e says which, where fail() was not
# called (functions too: -E).
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR

: "${TRELLIS_BIN:?set TRELLIS_BIN to the bin directory of a build}"
: "${TRELLIS_TEST_CLUSTER:?set TRELLIS_TEST_CLUSTER to a running local cluster directory}"
# shellcheck disable=SC1091
. "$TRELLIS_TEST_CLUSTER/env"

E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/trellis-e2e.XXXXXX")
CONTROLLER_PID=""
CONTROLLER_PORT=""
# The ranks' rendezvous ports (base + an offset below 2000 from the run id),
# apart from those of a demo controller on this machine (29500 up): run ids
# repeat across controllers (the first tiny-moe run is tiny-moe-1 in each).
# The environment may move it, for a second suite beside this one.
E2E_MASTER_PORT_BASE=${E2E_MASTER_PORT_BASE:-27500}

log() { echo "[$(date +%H:%M:%S)] $*"; }
fail() {
  echo "FAIL: $*" >&2
  if [ -f "$E2E_DIR/controller.log" ]; then
    echo "--- controller log (tail) ---" >&2
    tail -n 40 "$E2E_DIR/controller.log" >&2
  fi
  exit 1
}

# [extra flags], after $E2E_CONTROLLER_FLAGS (e.g. --db-journal rollback): a
# restart keeps the port: workers and batch scripts dial it.
start_controller() {
  rm -f "$E2E_DIR/port"
  # Its own socket (the default one is a user's); the CLI dials TCP with the token.
  "$TRELLIS_BIN/trellis-controller" --listen "127.0.0.1:${CONTROLLER_PORT:-0}" \
    --socket "$E2E_DIR/ctl/controller.sock" \
    --port-file "$E2E_DIR/port" \
    --db "${E2E_DB:-$E2E_DIR/controller.db}" --output-root "$E2E_DIR/runs" --data-root "$E2E_DIR" \
    --schedule-interval-ms 200 --reconcile-interval-ms 1000 \
    --master-port-base "$E2E_MASTER_PORT_BASE" \
    --metrics-listen 127.0.0.1:0 --prometheus-sd-file "$E2E_DIR/targets.json" \
    ${E2E_CONTROLLER_FLAGS:-} "$@" \
    >>"$E2E_DIR/controller.log" 2>&1 &
  CONTROLLER_PID=$!
  local deadline=$((SECONDS + 20))
  while [ ! -s "$E2E_DIR/port" ]; do
    kill -0 "$CONTROLLER_PID" 2>/dev/null || fail "controller exited at start"
    [ $SECONDS -lt $deadline ] || fail "controller did not start within 20 s"
    sleep 0.1
  done
  CONTROLLER_PORT=$(cat "$E2E_DIR/port")
  export TRELLIS_ADDR="127.0.0.1:$CONTROLLER_PORT"
  log "controller pid $CONTROLLER_PID on $TRELLIS_ADDR"
}

stop_controller() {  # [signal]
  [ -n "$CONTROLLER_PID" ] || return 0
  kill "-${1:-TERM}" "$CONTROLLER_PID" 2>/dev/null || true
  wait "$CONTROLLER_PID" 2>/dev/null || true
  CONTROLLER_PID=""
}

cleanup() {
  stop_controller KILL
  # Leave no job of this test behind on the shared cluster.
  local db=${E2E_DB:-$E2E_DIR/controller.db}
  if [ -f "$db" ]; then
    for job in $(sqlite3 "$db" "SELECT slurm_job_id FROM attempts" 2>/dev/null) \
               $(sqlite3 "$db" "SELECT job_id FROM pool_jobs" 2>/dev/null); do
      scancel "$job" 2>/dev/null || true
    done
  fi
  if [ "${KEEP_E2E_DIR:-0}" = 1 ]; then echo "kept $E2E_DIR"; else rm -rf "$E2E_DIR"; fi
}
trap cleanup EXIT

trellis() { "$TRELLIS_BIN/trellis" "$@"; }

# json_get FILE PYTHON_EXPR: evaluates EXPR with `d` bound to the JSON document.
json_get() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

run_json() {  # ID -> path of a fresh `trellis show --json` dump
  trellis show "$1" --json >"$E2E_DIR/show.json" || fail "trellis show $1 failed"
  echo "$E2E_DIR/show.json"
}

run_state() { json_get "$(run_json "$1")" "d['state']"; }

wait_state() {  # ID STATE TIMEOUT_S
  local deadline=$((SECONDS + $3)) state=""
  while [ $SECONDS -lt $deadline ]; do
    state=$(run_state "$1")
    [ "$state" = "$2" ] && { log "run $1 is $2"; return 0; }
    case "$state" in SUCCEEDED|FAILED|CANCELLED) break ;; esac
    sleep 0.3
  done
  trellis show "$1" >&2 || true
  fail "run $1 is $state, expected $2 within $3 s"
}

write_spec() {  # NAME COMMAND [extra toml...] -> path
  local path="$E2E_DIR/$1.toml"
  {
    printf '[job]\nname = "%s"\ncommand = """%s"""\n[slurm]\nnodes = 2\nranks_per_node = 2\n' "$1" "$2"
    shift 2
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$path"
  echo "$path"
}

# Steps of run ID stored with all 4 ranks (write_spec's 2 nodes x 2 ranks).
complete_steps() {  # ID
  sqlite3 "${E2E_DB:-$E2E_DIR/controller.db}" \
    "SELECT COUNT(*) FROM steps WHERE run_id='$1' AND ranks=4"
}
wait_complete_steps() {  # ID MORE_THAN TIMEOUT_S
  local deadline=$((SECONDS + $3))
  until [ "$(complete_steps "$1")" -gt "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1: no more than $2 complete steps stored in $3 s"
    sleep 0.2
  done
}

# examples/tiny-moe-2x2.toml on a corpus of the system's license texts built
# here, edited by the sed expressions given (-e ... each); prints the spec's
# path. The caller skips (77) first where trellis-corpus was not built.
tiny_moe_spec() {  # [sed -e EXPR ...]
  local repo spec="$E2E_DIR/tiny-moe.toml"
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  "$TRELLIS_BIN/trellis-corpus" build "$E2E_DIR/licenses.corpus" /usr/share/common-licenses \
    >/dev/null || fail "trellis-corpus failed"
  sed -e "s|^data = .*|data = \"$E2E_DIR/licenses.corpus\"|" "$@" \
    "$repo/examples/tiny-moe-2x2.toml" >"$spec"
  echo "$spec"
}

# Another lane of the suite may run a run of the same id on this host at once:
# a worker is this test's by its controller's address, a rank by its
# checkpoint directory under this test's own directory.
our_worker_pids() {  # ID: the run's workers, started by this test's controller
  # Anchored: the batch script's srun carries the same words after its own.
  pgrep -f "^[^ ]*trellis-worker agent --controller 127.0.0.1:$CONTROLLER_PORT --run $1 " || true
}
is_our_rank() {  # PID
  tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep >/dev/null "^TRELLIS_CHECKPOINT_DIR=$E2E_DIR/"
}

# A [model] rank of this test's run: its pid and node, once it runs.
our_rank_pid_node() {  # ID LAUNCH RANK -> "pid node"
  local d env deadline=$((SECONDS + 90))
  while [ $SECONDS -lt $deadline ]; do
    for d in /proc/[0-9]*; do
      env=$({ tr '\0' '\n' <"$d/environ"; } 2>/dev/null) || continue
      echo "$env" | grep -qx "TRELLIS_RUN=$1" || continue
      echo "$env" | grep -q "^TRELLIS_CHECKPOINT_DIR=$E2E_DIR/" || continue
      if echo "$env" | grep -qx "RANK=$3" && echo "$env" | grep -qx "TRELLIS_LAUNCH=$2"; then
        echo "${d#/proc/} $(echo "$env" | sed -n 's/^SLURMD_NODENAME=//p')"
        return
      fi
    done
    sleep 0.2
  done
  fail "no rank $3 of launch $2 of $1 found"
}

worker_pid_on() {  # ID NODE: the pid of the run's worker on NODE (nodes share this host)
  local p
  for p in $(our_worker_pids "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -x >/dev/null "SLURMD_NODENAME=$2" && { echo "$p"; return; }
  done
}

# Asserts what a node_lost relaunch leaves: one attempt (one Slurm job), launch
# 1 classed node_lost and blamed on NODE. Prints the path of the show dump.
expect_node_lost_relaunch() {  # ID NODE
  local show
  show=$(run_json "$1")
  [ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "expected one attempt (one Slurm job)"
  [ "$(json_get "$show" "d['launches'][0]['failure_class']")" = node_lost ] ||
    fail "launch 1: $(json_get "$show" "d['launches'][0]")"
  [ "$(json_get "$show" "d['launches'][0]['blamed_node']")" = "$2" ] ||
    fail "the blamed node is not $2"
  echo "$show"
}

wait_job_gone() {  # JOB_ID TIMEOUT_S: until Slurm's queue no longer lists the job
  local deadline=$((SECONDS + $2))
  while squeue -h -j "$1" 2>/dev/null | grep >/dev/null .; do
    [ $SECONDS -lt $deadline ] || fail "job $1 still in squeue after $2 s"
    sleep 0.5
  done
}

# For tests that change the shared cluster (fixtures, drained nodes): start
# from a clean cluster and leave it clean, whatever happens.
use_clean_cluster() {
  CLUSTER_CTL="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/deploy/slurm/local-cluster"
  "$CLUSTER_CTL" reset "$TRELLIS_TEST_CLUSTER" >/dev/null
  # cleanup runs even when the reset fails (a job Slurm still holds COMPLETING).
  trap '"$CLUSTER_CTL" reset "$TRELLIS_TEST_CLUSTER" >/dev/null || true; cleanup' EXIT
}
