#!/usr/bin/env bash
# The controller kept alive by Slurm (deploy/keepalive/trellis-keeper
# --chain, the recipe for sites without scrontab; a scrontab entry runs the
# same script without --chain): the controller runs as a batch job from a
# config file, its state directory in this test's directory. Its process is
# SIGKILLed while a run trains (its host is lost); the job ends, the
# successor the job submitted starts, its controller takes the lease over and
# serves on a new port; the workers follow the address file, the run
# SUCCEEDS with every step stored, and the CLI reaches each controller by
# TRELLIS_STATE_DIR alone. The state directory is a FUSE mount (bindfs, where
# it and /dev/fuse are: no NFS server can run here), which the controller
# takes for a network filesystem, as it would NFS: the rollback journal.
. "$(dirname "$0")/lib.sh"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
STEPS_PY="$REPO/tests/e2e/steps.py"
STEPS=250
STATE=$E2E_DIR/state
E2E_DB=$STATE/trellis.db  # lib.sh's cleanup cancels the run's jobs from it
NAME=trellis-keeper-$$
network=0
mkdir -p "$E2E_DIR/state-disk" "$STATE"
if command -v bindfs >/dev/null && [ -e /dev/fuse ] &&
   bindfs "$E2E_DIR/state-disk" "$STATE" 2>"$E2E_DIR/bindfs.err"; then
  network=1
else
  log "no FUSE mount here ($(cat "$E2E_DIR/bindfs.err" 2>/dev/null)): the state stays on local disk"
fi
keeper_cleanup() {
  scancel --name "$NAME" 2>/dev/null || true
  # The controller, then the mount, then lib.sh's cleanup (which reads the database).
  pkill -KILL -f "trellis-controller --config $E2E_DIR/controller.toml" 2>/dev/null || true
  cp "$STATE/trellis.db" "$E2E_DIR/trellis.db" 2>/dev/null || true
  if [ "$network" = 1 ]; then
    fusermount -u "$STATE" 2>/dev/null || umount -l "$STATE" 2>/dev/null || true
  fi
  E2E_DB=$E2E_DIR/trellis.db
  cleanup
}
trap keeper_cleanup EXIT

cat >"$E2E_DIR/controller.toml" <<TOML
state-dir = "$STATE"
listen = "127.0.0.1:0"
socket = "$E2E_DIR/ctl/controller.sock"
data-root = ["$E2E_DIR"]
metrics-listen = "off"
schedule-interval-ms = 200
reconcile-interval-ms = 1000
master-port-base = $E2E_MASTER_PORT_BASE
lease-ttl-s = 3
TOML
TRELLIS_KEEPER_RETRY_S=1 TRELLIS_CONTROLLER=$TRELLIS_BIN/trellis-controller \
  sbatch --parsable --job-name="$NAME" --time=10 --cpus-per-task=1 \
  --output="$E2E_DIR/controller.log" "$REPO/deploy/keepalive/trellis-keeper" --chain \
  --config "$E2E_DIR/controller.toml" >"$E2E_DIR/keeper-job" || fail "sbatch of the keeper failed"
first_job=$(cat "$E2E_DIR/keeper-job")

address_field() {  # FIELD of the state directory's address file ('' when none)
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
    "$STATE/controller.address" "$1" 2>/dev/null || true
}
wait_address_change() {  # OLD_ADDRESS TIMEOUT_S
  local deadline=$((SECONDS + $2))
  until [ -n "$(address_field address)" ] && [ "$(address_field address)" != "$1" ] &&
        trellis ls >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "no controller serving a new address within $2 s"
    sleep 0.2
  done
}
unset TRELLIS_ADDR
export TRELLIS_STATE_DIR=$STATE
wait_address_change "" 60
first=$(address_field address)
first_pid=$(address_field pid)
log "keeper job $first_job: controller pid $first_pid on $first"
if [ "$network" = 1 ]; then
  grep >/dev/null "on fuse, a network filesystem: rollback journal" "$E2E_DIR/controller.log" ||
    fail "the controller did not take the FUSE mount for a network filesystem"
  [ ! -e "$STATE/trellis.db-wal" ] || fail "a WAL file beside the database on the FUSE mount"
fi

spec=$(write_spec kept "exec python3 $STEPS_PY" '[env]' "STEPS = \"$STEPS\"" 'STEP_S = "0.1"' \
  'CKPT_EVERY = "50"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 60
wait_complete_steps "$id" 5 30
kill -KILL "$first_pid"
log "controller pid $first_pid killed at $(complete_steps "$id") steps stored"

wait_address_change "$first" 90
second=$(address_field address)
log "a controller serves again on $second (pid $(address_field pid))"
wait_state "$id" SUCCEEDED 120
[ "$(complete_steps "$id")" = "$STEPS" ] ||
  fail "$(complete_steps "$id") of $STEPS steps stored with all 4 ranks"
grep -rl "the controller moved: $first -> $second" "$STATE/runs" >/dev/null ||
  fail "no worker log says it followed the controller"
grep >/dev/null "taken over from host .*, pid $first_pid" "$E2E_DIR/controller.log" ||
  fail "the second controller did not say it took the lease over"
[ -n "$(squeue -h -n "$NAME" -t PENDING -o %i)" ] || fail "the chain has no successor waiting"
log "PASS: the keeper's successor took over from the killed controller;" \
  "$id SUCCEEDED with all $STEPS steps"
