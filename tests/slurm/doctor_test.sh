#!/usr/bin/env bash
# `trellis doctor` and `trellis-controller --check` on a real 2-node Slurm
# cluster of their own (docs/architecture.md, "Doctor"): clean, every line is
# ok or skip and the exit is 0; then each part is broken for real, one at a
# time, and its line names what is wrong: Slurm's commands missing, a
# partition that does not exist, the worker binary not visible from the
# compute nodes, the controller not reachable from them, sysfs NUMA not
# readable there, WAL on a network filesystem (a FUSE mount), munged stopped,
# slurmctld stopped. Needs root (the cluster), slurm-wlm and munge.
set -euo pipefail
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
: "${TRELLIS_BIN:?set TRELLIS_BIN to the bin directory of a build}"
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
LC="$ROOT/deploy/slurm/local-cluster"
[ "$(id -u)" = 0 ] || { echo "SKIP: the local cluster needs root"; exit 77; }

D=$(mktemp -d "${TMPDIR:-/tmp}/doctor-test.XXXXXX")
# Its own ports (deploy/slurm/README.md, "Port bases"): 16000-16999.
PB=$((16000 + ($$ % 90) * 10))
CTL_PID=""
log() { echo "[$(date +%H:%M:%S)] $*"; }
cleanup() {
  [ -n "$CTL_PID" ] && kill -KILL "$CTL_PID" 2>/dev/null
  if mountpoint -q "$D/net" 2>/dev/null; then
    fusermount -u "$D/net" 2>/dev/null || umount -l "$D/net"
  fi
  "$LC" down "$D/cluster" >/dev/null 2>&1 || true
  [ "${KEEP:-0}" = 1 ] && echo "kept $D" || rm -rf "$D"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$D/out" ] && cat "$D/out" >&2
  exit 1
}

"$LC" up "$D/cluster" --nodes 2 --port-base "$PB" >"$D/up.log" 2>&1 ||
  { cat "$D/up.log"; fail "cluster up"; }
# shellcheck disable=SC1091
. "$D/cluster/env"

check() {  # [flags...]: the controller's --check into $D/out; prints its exit code
  "$TRELLIS_BIN/trellis-controller" --check --state-dir "$D/state" --listen 127.0.0.1:0 \
    --socket "$D/ctl/c.sock" --metrics-listen off "$@" >"$D/out" 2>&1 && echo 0 || echo $?
}
expect() {  # RC VERDICT PATTERN WHAT: the last check exited RC with a line VERDICT ... PATTERN
  [ "$RC" = "$1" ] || fail "$4: exit $RC, not $1"
  grep -E "^$2 +$3" "$D/out" >/dev/null || fail "$4: no line '$2 $3'"
  log "$4: $(grep -E "^$2 +$3" "$D/out" | head -1 | cut -c1-150)"
}

RC=$(check)
[ "$RC" = 0 ] || fail "a clean site: exit $RC"
! grep "^FAIL" "$D/out" || fail "a clean site has a failed line"
for line in "slurm commands" slurmctld munge partition "node node[0-9]: worker" \
            "node node[0-9]: numa" "node node[0-9]: path $D/state/runs" store lease; do
  grep -E "^ok +$line" "$D/out" >/dev/null || fail "clean: no ok line for '$line'"
done
log "clean: $(grep -c '^ok' "$D/out") ok, $(grep -c '^skip' "$D/out") skipped, exit 0"

RC=$(check --slurm-bin-dir /nonexistent)
expect 1 FAIL "slurm commands: sbatch, .* not found in /nonexistent" "Slurm's commands missing"
RC=$(check --partition nope)
expect 1 FAIL "partition: 'nope' is not a partition here; the partitions: debug" "no such partition"
RC=$(check --worker-bin /nonexistent/trellis-worker)
expect 1 FAIL \
  "node node[0-9]: srun started on node[0-9] but could not run /nonexistent/trellis-worker" \
  "worker binary not visible"

# sysfs NUMA not readable on the nodes (the cluster's per-node fixture roots).
for n in "$D"/cluster/nodes/*/; do mv "$n/sysfs" "$n/sysfs.away"; done
RC=$(check)
expect 1 FAIL "node node[0-9]: numa" "sysfs NUMA not readable"
for n in "$D"/cluster/nodes/*/; do mv "$n/sysfs.away" "$n/sysfs"; done

# WAL forced on a network filesystem: a FUSE mount, as NFS would be.
if command -v bindfs >/dev/null && [ -e /dev/fuse ] && mkdir -p "$D/net-disk" "$D/net" &&
   bindfs "$D/net-disk" "$D/net" 2>/dev/null; then
  RC=$("$TRELLIS_BIN/trellis-controller" --check --state-dir "$D/net/state" --db-journal wal \
    --listen 127.0.0.1:0 --socket "$D/ctl/c.sock" --metrics-listen off >"$D/out" 2>&1 &&
    echo 0 || echo $?)
  expect 1 FAIL "store: db .* on fuse, a network filesystem: WAL" "WAL on a network filesystem"
  fusermount -u "$D/net" 2>/dev/null || umount -l "$D/net"
else
  log "no FUSE mount here: the WAL-on-a-network-filesystem case is not run"
fi

# A serving controller: trellis doctor through it, clean, then with workers
# told to dial an address nothing listens on.
start_controller() {  # [flags...]
  rm -f "$D/state/controller.address" "$D/port"
  "$TRELLIS_BIN/trellis-controller" --state-dir "$D/state" --listen 127.0.0.1:0 \
    --port-file "$D/port" \
    --socket "$D/ctl/c.sock" --metrics-listen off --lease-ttl-s 3 "$@" >"$D/controller.log" 2>&1 &
  CTL_PID=$!
  for _ in $(seq 100); do [ -s "$D/state/controller.address" ] && return 0; sleep 0.1; done
  cat "$D/controller.log"
  fail "the controller did not start"
}
stop_controller() { kill -TERM "$CTL_PID"; wait "$CTL_PID" 2>/dev/null || true; CTL_PID=""; }
doctor() {  # [args]: trellis doctor into $D/out; prints its exit code
  TRELLIS_STATE_DIR="$D/state" "$TRELLIS_BIN/trellis" doctor "$@" >"$D/out" 2>&1 &&
    echo 0 || echo $?
}
start_controller
RC=$(doctor)
expect 0 ok "node node[0-9]: controller: reached 127.0.0.1:" "trellis doctor, clean"
grep -E "^ok +controller: reached 127.0.0.1:[0-9]+, version" "$D/out" >/dev/null ||
  fail "trellis doctor does not say it reached the controller"
grep -E "^ok +lease: held by host .*\(this controller\)" "$D/out" >/dev/null ||
  fail "trellis doctor's lease line does not name this controller"
printf '[job]\nname = "d"\ncommand = "true"\n[slurm]\npartition = "nope"\n' >"$D/spec.toml"
RC=$(doctor "$D/spec.toml")
expect 1 FAIL "partition: 'nope' is not a partition here" "trellis doctor SPEC, its partition"
stop_controller
# The address file names what workers dial: the CLI dials the bound port.
start_controller --advertise 127.0.0.1:1
RC=$(TRELLIS_ADDR=127.0.0.1:$(cat "$D/port") doctor)
expect 1 FAIL "node node[0-9]: controller: cannot reach 127.0.0.1:1" \
  "controller not reachable from a node"
stop_controller
RC=$(doctor)
expect 5 FAIL "controller: no answer from" "no controller"

# munged stopped, then slurmctld: the last, they break the cluster.
pkill -f "munged.*$D/cluster" || fail "no munged of this cluster"
sleep 1
RC=$(check)
expect 1 FAIL "munge: munge -n \| unmunge failed" "munged stopped"
pkill -f "slurmctld.*$D/cluster" || pkill -f "slurmctld -f $D/cluster" || true
sleep 1
RC=$(check)
expect 1 FAIL "slurmctld:" "slurmctld stopped"
log "PASS: clean, then each broken part named"
