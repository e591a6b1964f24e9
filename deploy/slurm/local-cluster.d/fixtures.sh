# local-cluster: the nodes' fake sysfs memory trees (DIR/nodes/NODE/sysfs):
# where a fixture comes from, installing one atomically, and the `fixture` and
# `make-fixture` commands. make_fixture.py beside this file writes the
# synthesized trees. Sourced by deploy/slurm/local-cluster.
# shellcheck shell=bash

FIXTURES_DIR="$SCRIPT_DIR/fixtures"
DEFAULT_FIXTURE=gh200-healthy

# make_fixture OUT ARGS...: a synthesized tree (see make_fixture.py).
make_fixture() {
  command -v python3 >/dev/null 2>&1 ||
    die "make-fixture needs python3 (deploy/setup.sh installs it)"
  python3 "$LIB_DIR/make_fixture.py" "$@" || exit 1
}

# Resolve a fixture SOURCE to a directory holding devices/system/node.
# Prints the directory; for a meminfo file, builds one under TMP.
fixture_source() {
  local src=$1 tmp=$2
  if [ -d "$src/devices/system/node" ]; then
    (cd "$src" && pwd -P); return
  fi
  if [ -d "$src/sysfs/devices/system/node" ]; then
    (cd "$src/sysfs" && pwd -P); return
  fi
  if [[ "$src" =~ ^[A-Za-z0-9._-]+$ ]] && [ -d "$FIXTURES_DIR/$src/devices/system/node" ]; then
    echo "$FIXTURES_DIR/$src"; return
  fi
  if [ -f "$src" ]; then
    grep -q '^Node [0-9]* MemTotal:' "$src" || die "fixture file '$src' does not look like a per-node meminfo"
    local d="$FIXTURES_DIR/$DEFAULT_FIXTURE"
    [ -d "$d" ] || die "default fixture missing: $d"
    mkdir -p "$tmp/src"
    cp -a "$d/devices" "$tmp/src/"
    cp "$src" "$tmp/src/devices/system/node/node0/meminfo"
    echo "$tmp/src"; return
  fi
  local names=() d
  for d in "$FIXTURES_DIR"/*/; do [ -d "$d" ] && names+=("$(basename "$d")"); done
  die "fixture source '$src' is neither a directory with devices/system/node, a meminfo file, nor a fixture in $FIXTURES_DIR (${names[*]})"
}

# install_fixture NODE SRC_DIR: atomically replace DIR/nodes/NODE/sysfs.
install_fixture() {
  local node=$1 src=$2
  local ndir=$NODES_DIR/$node
  mkdir -p "$ndir"
  local new=$ndir/.sysfs.new.$$ old=$ndir/.sysfs.old.$$
  rm -rf "$new" "$old"
  mkdir -p "$new"
  cp -a "$src/devices" "$new/"
  chmod -R a+rX "$new"
  if [ -e "$ndir/sysfs" ]; then mv "$ndir/sysfs" "$old"; fi
  mv "$new" "$ndir/sysfs"
  rm -rf "$old"
}

default_fixture_dir() {
  local d="$FIXTURES_DIR/$DEFAULT_FIXTURE"
  [ -d "$d/devices/system/node" ] || die "default fixture missing: $d (the fixtures/ directory must sit beside this script)"
  echo "$d"
}

cmd_fixture() {
  local dir_arg=${1:-} node=${2:-}; shift 2 || die "usage: $PROG fixture DIR NODE SOURCE|--reset|--free-gib ..."
  [ $# -ge 1 ] || die "usage: $PROG fixture DIR NODE SOURCE|--reset|--free-gib ..."
  local dir; dir=$(resolve_dir "$dir_arg" 0)
  set_paths "$dir"
  [ -d "$NODES_DIR" ] || die "no cluster in $DIR (run '$PROG up $DIR' first)"
  local targets=()
  if [ "$node" = all ]; then
    local t
    for t in "$NODES_DIR"/node*; do [ -d "$t" ] && targets+=("$(basename "$t")"); done
  else
    [[ "$node" =~ ^node[0-9]+$ ]] || die "NODE must look like node3 (or be 'all'), got '$node'"
    [ -d "$NODES_DIR/$node" ] || die "$DIR has no node '$node' (it has $(cd "$NODES_DIR" && echo node*))"
    targets=("$node")
  fi
  exec 9>"$DIR/.lock"
  flock -w 120 9 || die "another $PROG command holds $DIR/.lock"
  local tmp; tmp=$(mktemp -d "${TMPDIR:-/tmp}/local-cluster-fixture.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  local src what
  case "$1" in
    --reset)
      [ $# -eq 1 ] || die "fixture --reset takes no more arguments"
      src=$(default_fixture_dir); what="default ($DEFAULT_FIXTURE)";;
    --*)
      make_fixture "$tmp/gen" "$@"
      src=$tmp/gen; what="synthesized ($*)";;
    *)
      [ $# -eq 1 ] || die "fixture: unexpected arguments after '$1'"
      src=$(fixture_source "$1" "$tmp"); what=$1;;
  esac
  local t
  for t in "${targets[@]}"; do install_fixture "$t" "$src"; done
  log "${targets[*]} sysfs fixture: $what"
}

cmd_make_fixture() {
  local out=${1:-}; shift || true
  [ -n "$out" ] || die "usage: $PROG make-fixture OUT --free-gib F[,F...] ..."
  make_fixture "$out" "$@"
  log "wrote $out/devices/system/node"
}
