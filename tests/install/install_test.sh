#!/usr/bin/env bash
# Installed without root, kept alive by Slurm (docs/install.md): the build's
# `cpack` tarball and `cmake --install --prefix` give the same tree; its
# programs name no build or source path and find every library. An
# unprivileged Unix user made by the test unpacks the tarball into
# ~/.local/trellis and submits the installed trellis-keeper as a chain of
# jobs, whose controller runs from a config file with its state directory on
# a FUSE mount (taken for a network filesystem, as NFS would be). Through the
# installed CLI alone (TRELLIS_STATE_DIR) the user trains the shipped
# examples/tiny-moe-2x2.toml; the controller's process is SIGKILLed mid-run,
# the keeper's successor job takes over, and the run SUCCEEDS with every
# step stored.
set -euo pipefail
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
: "${TRELLIS_BIN:?set TRELLIS_BIN to the bin directory of a build}"
: "${TRELLIS_TEST_CLUSTER:?set TRELLIS_TEST_CLUSTER to a running local cluster directory}"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make a user"; exit 77; }
command -v useradd >/dev/null && command -v runuser >/dev/null ||
  { echo "SKIP: useradd/runuser missing"; exit 77; }
BUILD=$(cd "$TRELLIS_BIN/.." && pwd)
[ -x "$TRELLIS_BIN/trellis-rank" ] ||
  { echo "SKIP: no trellis-rank (a build without LibTorch)"; exit 77; }
# shellcheck disable=SC1091
. "$TRELLIS_TEST_CLUSTER/env"

U=trellis-test-install
H=/home/$U
WORK=$(mktemp -d /tmp/trellis-install.XXXXXX)
log() { echo "[$(date +%H:%M:%S)] $*"; }
fail() {
  echo "FAIL: $*" >&2
  [ -f "$WORK/controller.log" ] && tail -30 "$WORK/controller.log" >&2
  exit 1
}
drop_user() {
  pkill -KILL -u "$U" 2>/dev/null || true
  for _ in $(seq 50); do pgrep -u "$U" >/dev/null || break; sleep 0.1; done
  userdel -r "$U" >/dev/null 2>&1 || true
}
cleanup() {
  for job in $(squeue -h -u "$U" -o %i 2>/dev/null); do scancel "$job" 2>/dev/null || true; done
  pkill -KILL -u "$U" 2>/dev/null || true
  if mountpoint -q "$H/trellis" 2>/dev/null; then
    fusermount -u "$H/trellis" 2>/dev/null || umount -l "$H/trellis" 2>/dev/null || true
  fi
  id "$U" >/dev/null 2>&1 && drop_user
  [ "${KEEP:-0}" = 1 ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
id "$U" >/dev/null 2>&1 && drop_user
useradd -m -s /bin/bash "$U"
chmod 700 "$H"

# The package, made as a site's builder would, and the install rules it runs.
(cd "$BUILD" && cpack -B "$WORK/pkg" >"$WORK/cpack.log" 2>&1) ||
  { tail "$WORK/cpack.log"; fail "cpack"; }
tarball=$(ls "$WORK"/pkg/trellis-*.tar.gz)
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
for p in trellis trellis-controller trellis-worker trellis-rank trellis-corpus trellis-export \
         trellis-keeper; do
  [ -x "$WORK/prefix/bin/$p" ] || fail "cmake --install left no bin/$p"
  tar tzf "$tarball" | grep >/dev/null "/bin/$p\$" || fail "the tarball has no bin/$p"
done
for f in share/trellis/examples/tiny-moe-2x2.toml share/trellis/docs/install.md \
         share/trellis/deploy/keepalive/scrontab.example \
         share/trellis/dashboards/run-overview.json; do
  [ -f "$WORK/prefix/$f" ] || fail "cmake --install left no $f"
done
# Nothing points back into the build or the sources: they may be gone.
src=$(cd "$(dirname "$0")/../.." && pwd)
for p in "$WORK"/prefix/bin/trellis*; do
  file "$p" | grep >/dev/null ELF || continue
  if readelf -d "$p" | grep -E "R(UN)?PATH" | grep -e "$BUILD" -e "$src" >/dev/null; then
    fail "$p's RPATH names the build tree: $(readelf -d "$p" | grep -E 'R(UN)?PATH')"
  fi
  ! ldd "$p" | grep "not found" || fail "$p misses a library"
done
log "cpack: $(basename "$tarball") ($(du -h "$tarball" | cut -f1));" \
  "cmake --install gives the same programs"

as() {  # CMD...: a login-less shell of the user, with the cluster's settings
  runuser -u "$U" -- env -i PATH="$H/.local/trellis/bin:/usr/bin:/bin" HOME="$H" USER="$U" \
    LOGNAME="$U" SLURM_CONF="$SLURM_CONF" "$@"
}
chmod 755 "$WORK" "$WORK/pkg"
chmod 644 "$tarball"
as mkdir -p "$H/.local/trellis"
as mkdir -p -m 700 "$H/.config/trellis"  # the token is made there (the controller checks)
as tar xzf "$tarball" -C "$H/.local/trellis" --strip-components=1
share=$H/.local/trellis/share/trellis
as "$H/.local/trellis/bin/trellis-corpus" build "$H/licenses.corpus" /usr/share/common-licenses \
  >/dev/null
# The state directory on a network filesystem: a FUSE mount (bindfs) where one
# can be made, which the controller takes for one as it would NFS (no NFS
# server runs on these machines); else the home directory's own disk.
network=0
mkdir -p "$WORK/state-disk" "$H/trellis"
chown "$U:$U" "$WORK/state-disk" "$H/trellis"
if command -v bindfs >/dev/null && [ -e /dev/fuse ] &&
   bindfs --force-user="$U" --force-group="$U" "$WORK/state-disk" "$H/trellis" 2>/dev/null; then
  network=1
else
  log "no FUSE mount here: the state directory stays on the home directory's disk"
fi
as tee "$H/.config/trellis/controller.toml" >/dev/null <<TOML
state-dir = "$H/trellis"
listen = "127.0.0.1:0"
metrics-listen = "off"
data-root = ["$H"]
master-port-base = ${E2E_MASTER_PORT_BASE:-21500}
lease-ttl-s = 3
TOML
# Kept alive by Slurm as the README says: a chain of keeper jobs, submitted
# by the user, each running the installed controller from the config file.
KEEPER=trellis-keeper-install-$$
as env TRELLIS_KEEPER_RETRY_S=1 sbatch --parsable --job-name="$KEEPER" --time=10 \
  --output="$H/keeper.out" "$H/.local/trellis/bin/trellis-keeper" --chain \
  --config "$H/.config/trellis/controller.toml" >/dev/null || fail "sbatch of the keeper"
address() {  # FIELD of the state directory's address file
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
    "$H/trellis/controller.address" "$1" 2>/dev/null || true
}
wait_new_address() {  # OLD TIMEOUT_S
  local deadline=$((SECONDS + $2))
  until [ -n "$(address address)" ] && [ "$(address address)" != "$1" ] &&
        as env TRELLIS_STATE_DIR="$H/trellis" trellis ls >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { cat "$H/keeper.out" >&2; fail "no controller within $2 s"; }
    sleep 0.2
  done
}
wait_new_address "" 60
first=$(address address)
first_pid=$(address pid)
if [ "$network" = 1 ]; then
  grep >/dev/null "on fuse, a network filesystem: rollback journal" "$H/keeper.out" ||
    fail "the controller did not take its FUSE state directory for a network filesystem"
fi
log "the installed controller (a keeper job of $U) serves $H/trellis on $first"

sed "s|^data = .*|data = \"$H/licenses.corpus\"|" "$share/examples/tiny-moe-2x2.toml" \
  >"$WORK/tiny.toml"
chmod 644 "$WORK/tiny.toml"
STEPS=80
id=$(as env TRELLIS_STATE_DIR="$H/trellis" trellis submit "$WORK/tiny.toml" \
  training.steps=$STEPS) || fail "submit through the installed CLI failed"
log "submitted $id as $U"
complete() { sqlite3 "$H/trellis/trellis.db" \
  "SELECT COUNT(*) FROM steps WHERE run_id='$id' AND ranks=4" 2>/dev/null || echo 0; }
deadline=$((SECONDS + 90))
until [ "$(complete)" -gt 5 ]; do
  [ $SECONDS -lt $deadline ] || fail "$id stored no steps"
  sleep 0.2
done
# The controller's host process is lost; the keeper's successor takes over.
kill -KILL "$first_pid"
log "controller pid $first_pid killed at step $(complete) of $STEPS"
wait_new_address "$first" 90
log "a successor controller serves on $(address address)"
as env TRELLIS_STATE_DIR="$H/trellis" trellis watch "$id" >"$WORK/watch.log" 2>&1 ||
  { tail -20 "$WORK/watch.log"; fail "$id did not succeed"; }
state=$(as env TRELLIS_STATE_DIR="$H/trellis" trellis show "$id" --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
[ "$state" = SUCCEEDED ] || fail "$id is $state"
[ "$(complete)" = "$STEPS" ] || fail "$(complete) of $STEPS steps stored with all 4 ranks"
# The job ran the installed worker (the controller's default: beside itself).
as grep -rh "^WORKER=" "$H/trellis/runs/$id" |
  grep >/dev/null "'$H/.local/trellis/bin/trellis-worker'" ||
  fail "the job did not run the installed worker: $(as grep -rh '^WORKER=' "$H/trellis/runs/$id")"
log "PASS: installed from $(basename "$tarball") as $U; the controller kept alive by Slurm;" \
  "$id SUCCEEDED with all $STEPS steps stored"
