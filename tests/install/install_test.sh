#!/usr/bin/env bash
# Installed without root (docs/install.md): the build's `cpack` tarball and
# `cmake --install --prefix` give the same tree; its programs name no build or
# source path and find every library; an unprivileged Unix user made by the
# test unpacks the tarball into ~/.local/trellis, starts the installed
# controller from a config file with its state in a directory of their own,
# and from the installed CLI alone (TRELLIS_STATE_DIR) trains the shipped
# examples/tiny-moe-2x2.toml on the local cluster to SUCCEEDED.
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
CTL_PID=""
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
  [ -n "$CTL_PID" ] && kill "$CTL_PID" 2>/dev/null
  for job in $(squeue -h -u "$U" -o %i 2>/dev/null); do scancel "$job" 2>/dev/null || true; done
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
as tee "$H/.config/trellis/controller.toml" >/dev/null <<TOML
state-dir = "$H/trellis"
listen = "127.0.0.1:0"
metrics-listen = "off"
data-root = ["$H"]
master-port-base = ${E2E_MASTER_PORT_BASE:-21500}
TOML
as "$H/.local/trellis/bin/trellis-controller" --config "$H/.config/trellis/controller.toml" \
  >"$WORK/controller.log" 2>&1 &
CTL_PID=$!
for _ in $(seq 100); do [ -s "$H/trellis/controller.address" ] && break; sleep 0.1; done
[ -s "$H/trellis/controller.address" ] || fail "the installed controller did not start"
grep >/dev/null "workers dial" "$WORK/controller.log" || fail "no serving line"
log "the installed controller serves $U's state in $H/trellis"

sed "s|^data = .*|data = \"$H/licenses.corpus\"|" "$share/examples/tiny-moe-2x2.toml" \
  >"$WORK/tiny.toml"
chmod 644 "$WORK/tiny.toml"
id=$(as env TRELLIS_STATE_DIR="$H/trellis" trellis submit "$WORK/tiny.toml" training.steps=20) ||
  fail "submit through the installed CLI failed"
log "submitted $id as $U"
as env TRELLIS_STATE_DIR="$H/trellis" trellis watch "$id" >"$WORK/watch.log" 2>&1 ||
  { tail -20 "$WORK/watch.log"; fail "$id did not succeed"; }
state=$(as env TRELLIS_STATE_DIR="$H/trellis" trellis show "$id" --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
[ "$state" = SUCCEEDED ] || fail "$id is $state"
# The job ran the installed worker (the controller's default: beside itself).
as grep -rh "^WORKER=" "$H/trellis/runs/$id" |
  grep >/dev/null "'$H/.local/trellis/bin/trellis-worker'" ||
  fail "the job did not run the installed worker: $(as grep -rh '^WORKER=' "$H/trellis/runs/$id")"
log "PASS: installed from $(basename "$tarball") as $U; $id SUCCEEDED from the installed tree"
