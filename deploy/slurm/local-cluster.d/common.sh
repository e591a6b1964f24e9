# local-cluster: messages, the checks of root and of the installed programs,
# DIR and its layout, the shape a cluster was started with, its ports, and the
# Slurm client wrapper `sl`. Sourced by deploy/slurm/local-cluster.
# shellcheck shell=bash

die() { echo "$PROG: error: $*" >&2; exit 1; }
log() { echo "$PROG: $*"; }

require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    die "the local cluster needs root, because slurmd does (it starts job steps as the submitting user). Run it as root, e.g. with sudo."
  fi
}

require_binaries() {
  local missing=() b
  for b in munged slurmctld slurmd slurmstepd sinfo squeue scontrol scancel sbatch srun flock; do
    find_program "$b" >/dev/null 2>&1 || missing+=("$b")
  done
  if [ "$ACCOUNTING" = 1 ]; then
    for b in slurmdbd sacctmgr sacct; do
      find_program "$b" >/dev/null 2>&1 || missing+=("$b")
    done
    mysqld_program >/dev/null 2>&1 || missing+=(mariadbd)
    install_db_program >/dev/null 2>&1 || missing+=(mariadb-install-db)
    sql_client_program >/dev/null 2>&1 || missing+=(mariadb)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$ACCOUNTING" = 1 ] && [ -z "$PREFIX" ]; then
      die "missing ${missing[*]}: run deploy/setup.sh (installs slurm-wlm, munge, slurmdbd and mariadb-server)"
    fi
    if [ -n "$PREFIX" ]; then
      die "missing ${missing[*]} under --prefix $PREFIX (unpack the staged packages there: deploy/gpu/unpack-prefix.sh)"
    fi
    die "missing ${missing[*]}: run deploy/setup.sh (installs slurm-wlm and munge)"
  fi
}

# --prefix ROOT: where Slurm and munge were unpacked. Empty: the system's.
prefix_libdirs() {
  local d out=
  [ -n "$PREFIX" ] || return 0
  for d in "$PREFIX"/usr/lib/*-linux-gnu "$PREFIX"/usr/lib/*-linux-gnu/slurm-wlm "$PREFIX"/lib/*-linux-gnu; do
    [ -d "$d" ] && out+="${out:+:}$d"
  done
  echo "$out"
}
daemon_path() {
  local base=/usr/sbin:/usr/bin:/sbin:/bin
  if [ -n "$PREFIX" ]; then echo "$PREFIX/usr/sbin:$PREFIX/usr/bin:$base"; else echo "$base"; fi
}
# The first of daemon_path's directories that holds program $1.
find_program() {
  local d
  for d in $(daemon_path | tr ':' ' '); do
    if [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  command -v "$1"
}
# MariaDB's server, its datadir initialiser and its client (or MySQL's names).
mysqld_program() { find_program mariadbd 2>/dev/null || find_program mysqld; }
install_db_program() { find_program mariadb-install-db 2>/dev/null || find_program mysql_install_db; }
sql_client_program() { find_program mariadb 2>/dev/null || find_program mysql; }
plugin_dir() { ls -d "$PREFIX"/usr/lib/*-linux-gnu/slurm-wlm 2>/dev/null | head -1; }

# Resolve DIR to an absolute path and check that Slurm and munge can use it.
resolve_dir() {
  local d=$1 create=$2
  [ -n "$d" ] || die "missing DIR (see --help)"
  case "$d" in -*) die "DIR must come right after the command, got '$d'";; esac
  case "$d" in /*) ;; *) d="$PWD/$d";; esac
  if ! [[ "$d" =~ ^[A-Za-z0-9/._+-]+$ ]]; then
    die "DIR '$d' has characters slurm.conf cannot hold (use letters, digits, / . _ + -)"
  fi
  if [ "$create" = 1 ]; then
    mkdir -p "$d" || die "cannot create $d"
  fi
  if [ -d "$d" ]; then d=$(cd "$d" && pwd -P); fi
  d=${d%/}
  if ! [[ "$d" =~ ^[A-Za-z0-9/._+-]+$ ]]; then
    die "DIR '$d' has characters slurm.conf cannot hold (use letters, digits, / . _ + -)"
  fi
  # Unix socket paths (munge, slurmd's step sockets) must stay under 108 bytes.
  if [ ${#d} -gt 60 ]; then
    die "DIR '$d' is too long (${#d} > 60 characters): unix socket paths under it would not fit"
  fi
  printf '%s\n' "$d"
}

# ----------------------------------------------------------------- layout --

set_paths() {
  DIR=$1
  CONF_DIR=$DIR/etc
  SLURM_CONF_FILE=$CONF_DIR/slurm.conf
  SHAPE_FILE=$CONF_DIR/cluster.shape
  RUN_DIR=$DIR/run
  LOG_DIR=$DIR/log
  STATE_DIR=$DIR/state
  SPOOL_DIR=$DIR/spool
  MUNGE_DIR=$DIR/munge
  NODES_DIR=$DIR/nodes
  MUNGE_SOCKET=$RUN_DIR/munge.socket
  MUNGE_PID=$RUN_DIR/munged.pid
  CTLD_PID=$RUN_DIR/slurmctld.pid
  ENV_FILE=$DIR/env
  # --accounting: slurmdbd and its MariaDB.
  DBD_CONF_FILE=$CONF_DIR/slurmdbd.conf
  DBD_PID=$RUN_DIR/slurmdbd.pid
  DB_DIR=$DIR/db
  MYSQLD_SOCKET=$RUN_DIR/mysqld.sock
  MYSQLD_PID=$RUN_DIR/mysqld.pid
  DAEMON_MARK="TRELLIS_LOCAL_CLUSTER_DAEMON=$DIR"
}

slurmd_pidfile() { echo "$RUN_DIR/slurmd-$1.pid"; }

load_shape() {
  NODES=; PORT_BASE=; CPUS=; GPUS_PER_NODE=0; SHARE_GPUS=0; HOST_SYSFS=0; PREFIX=; ACCOUNTING=0
  QUEUE_WAIT_MEDIAN_S=; QUEUE_WAIT_SIGMA=; QUEUE_WAIT_SEED=
  if [ -f "$SHAPE_FILE" ]; then
    # shellcheck disable=SC1090
    . "$SHAPE_FILE"
  fi
}

node_names() {
  local k
  for ((k = 1; k <= NODES; k++)); do echo "node$k"; done
}

# Runs a Slurm client against this cluster, with nothing from the caller's
# Slurm environment leaking in.
sl() {
  env -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_CLUSTERS SLURM_CONF="$SLURM_CONF_FILE" \
    PATH="$(daemon_path):$PATH" ${PREFIX:+LD_LIBRARY_PATH="$(prefix_libdirs)"} "$@"
}

# --accounting ports: slurmdbd right after the last slurmd, then MariaDB.
dbd_port() { echo $((PORT_BASE + NODES + 1)); }
mysqld_port() { echo $((PORT_BASE + NODES + 2)); }
# The highest port the cluster uses.
last_port() { if [ "$ACCOUNTING" = 1 ]; then mysqld_port; else echo $((PORT_BASE + NODES)); fi; }

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_for() {
  # wait_for SECONDS CMD...: poll CMD every 0.2 s.
  local s=$1; shift
  local deadline=$((SECONDS + s))
  while ! "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}
