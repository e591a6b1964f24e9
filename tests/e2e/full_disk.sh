#!/usr/bin/env bash
# The controller's disk full while a run ends: its database on a small tmpfs
# that is filled once the run has stored some steps. The ranks finish, the
# workers cannot get their last batches stored and keep them in their launch
# directory (steps-spool-<node>.jsonl); `trellis show` says the run's records
# are incomplete and how many wait. Once space is freed the controller stores
# the spools, removes them, and the run ends SUCCEEDED with every step of
# every rank stored. A submit while the disk is full exits 6, saying so.
# Needs root (the mount); 77 otherwise.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

fs="$E2E_DIR/dbfs"
mkdir -p "$fs"
mount -t tmpfs -o size=8m tmpfs "$fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
# The jobs are cancelled (from the database on the mount) before it goes.
trap 'KEEP_E2E_DIR=1 cleanup >/dev/null; umount "$fs" 2>/dev/null || true; rm -rf "$E2E_DIR"' EXIT
E2E_DB="$fs/controller.db"
start_controller
spec=$(write_spec full "exec python3 $STEPS_PY" '[env]' 'STEPS = "100"' 'STEP_S = "0.1"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
until [ "$(json_get "$(run_json "$id")" "d['last_step']")" -ge 10 ]; do sleep 0.2; done
dd if=/dev/zero of="$fs/filler" bs=64k 2>/dev/null || true
log "the controller's disk is full ($(df --output=avail -h "$fs" | tail -1 | tr -d ' ') left)"
# A submit now is refused with an exit code of its own (6), nothing stored.
rc=0
out=$(trellis submit "$spec" 2>&1) || rc=$?
[ "$rc" = 6 ] || fail "a submit to a full controller exited $rc, expected 6: $out"
case "$out" in *"disk is full"*"send it again once the controller has space"*) ;;
  *) fail "the refused submit does not say why: $out" ;; esac

deadline=$((SECONDS + 90))
until [ "$(json_get "$(run_json "$id")" "d['unstored_step_records']")" -gt 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "no unstored records reported within 90 s"
  sleep 0.5
done
show=$(trellis show "$id")
echo "$show" | grep >/dev/null "^records    incomplete: [0-9]* step record(s) kept by the workers" ||
  fail "show does not say the records are incomplete: $show"
spools=$(ls "$E2E_DIR/runs/$id"/attempt-1/launch-1/steps-spool-*.jsonl 2>/dev/null | wc -l)
[ "$spools" -ge 1 ] || fail "no spool file in the launch directory"
log "$(echo "$show" | grep '^records'); $spools spool file(s)"

rm -f "$fs/filler"
log "space freed"
wait_state "$id" SUCCEEDED 120
deadline=$((SECONDS + 30))
while ls "$E2E_DIR/runs/$id"/attempt-1/launch-1/steps-spool-*.jsonl >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || fail "the spools were not stored and removed within 30 s"
  sleep 0.5
done
show=$(run_json "$id")
[ "$(json_get "$show" "d['unstored_step_records']")" = 0 ] || fail "records still unstored"
steps=$(sqlite3 "$E2E_DB" \
  "SELECT COUNT(*), MIN(step), MAX(step) FROM steps WHERE run_id='$id' AND ranks=4")
[ "$steps" = "100|1|100" ] || fail "steps with all 4 ranks (count|min|max): $steps, expected 100|1|100"
log "PASS: $id SUCCEEDED with all 100 steps of its 4 ranks stored after the disk was full"
