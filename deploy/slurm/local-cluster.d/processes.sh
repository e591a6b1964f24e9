# local-cluster: the cluster's processes. Liveness from /proc, the pid files
# (a pid counts only when its environment carries the cluster's mark), every
# process that belongs to DIR, and stopping them (TERM, then KILL). Sourced by
# deploy/slurm/local-cluster.
# shellcheck shell=bash

# stat_field PID N: the Nth field of /proc/PID/stat after "(comm)"
# (1 = state, 2 = ppid); comm may hold spaces or parentheses.
stat_field() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$stat" ] || return 1
  stat=${stat##*) }
  local -a fields
  read -r -a fields <<<"$stat"
  echo "${fields[$(($2 - 1))]}"
}

pid_alive() {
  local pid=$1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -d "/proc/$pid" ] || return 1
  # A zombie is not alive.
  local st
  st=$(stat_field "$pid" 1) || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}

# pidfile_alive FILE NAME: the pid in FILE if it runs a program called NAME.
pidfile_pid() {
  local f=$1 name=$2 pid comm
  [ -f "$f" ] || return 1
  pid=$(head -c 32 "$f" 2>/dev/null | tr -dc 0-9)
  pid_alive "$pid" || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [ "$comm" = "$name" ] || return 1
  # Make sure it is ours: its environment carries this cluster's mark.
  grep -qzxF -- "$DAEMON_MARK" "/proc/$pid/environ" 2>/dev/null || return 1
  echo "$pid"
}

munged_pid() { pidfile_pid "$MUNGE_PID" munged; }
ctld_pid() { pidfile_pid "$CTLD_PID" slurmctld; }
slurmd_pid() { pidfile_pid "$(slurmd_pidfile "$1")" slurmd; }
dbd_pid() { pidfile_pid "$DBD_PID" slurmdbd; }
# MariaDB's server runs as mariadbd (or mysqld, by the name it was started with).
mysqld_pid() { pidfile_pid "$MYSQLD_PID" mariadbd || pidfile_pid "$MYSQLD_PID" mysqld; }

# Pids of this process and its ancestors: never killed.
self_and_ancestors() {
  local p=${BASHPID:-$$}
  while [ -n "$p" ] && [ "$p" != 0 ]; do
    echo "$p"
    p=$(stat_field "$p" 2) || break
  done
}

# DIR as an extended regular expression (DIR holds only [A-Za-z0-9/._+-]).
ere_quote() { sed 's/[.+]/\\&/g' <<<"$1"; }

# Every process that belongs to this cluster, except us and our ancestors:
#  - daemons (their environment carries the cluster mark),
#  - slurmstepd and slurmscriptd (SLURM_CONF pointing here),
#  - job processes (SLURM_JOB_ID set and SLURM_CONF pointing here),
#  - any process whose command line names DIR (other than this script).
cluster_pids() {
  local -A skip=()
  local p f files=() pids=()
  for p in $(self_and_ancestors); do skip[$p]=1; done
  # Collect first (every grep has finished before any pid is looked at, so
  # the greps, whose arguments name DIR, never count).
  mapfile -t files < <(grep -lzxF -- "$DAEMON_MARK" /proc/[0-9]*/environ 2>/dev/null || true)
  for f in $(grep -lzxF -- "SLURM_CONF=$SLURM_CONF_FILE" /proc/[0-9]*/environ 2>/dev/null || true); do
    # Job processes, and the slurmstepd's (slurmd gives them only SLURM_CONF).
    if grep -qz '^SLURM_JOB_ID=' "$f" 2>/dev/null; then
      files+=("$f")
    else
      case "$(cat "${f%/environ}/comm" 2>/dev/null)" in
        slurmstepd|slurmd|slurmctld|slurmscriptd) files+=("$f");;
      esac
    fi
  done
  # DIR as a whole path in an argument: /tmp/c must not match /var/tmp/c or
  # /tmp/c2, whose clusters are not ours.
  local named
  named=$(grep -lzE -- "(^|[^A-Za-z0-9/._+-])$(ere_quote "$DIR")(/|[^A-Za-z0-9._+-]|\$)" \
            /proc/[0-9]*/cmdline 2>/dev/null || true)
  for f in $named; do
    # Leave other invocations of this script alone (e.g. a concurrent status).
    if ! grep -qzE -- "(^|/)$PROG\$" "$f" 2>/dev/null; then files+=("$f"); fi
  done
  for f in "${files[@]}"; do
    p=${f#/proc/}; p=${p%%/*}
    [ -n "${skip[$p]:-}" ] && continue
    skip[$p]=1
    if pid_alive "$p"; then pids+=("$p"); fi
  done
  if [ ${#pids[@]} -gt 0 ]; then printf '%s\n' "${pids[@]}" | sort -n; fi
}

# kill_and_wait SECONDS PID...: TERM, wait up to SECONDS, then KILL.
kill_and_wait() {
  local wait_s=$1; shift
  local pids=("$@") p alive deadline
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  deadline=$((SECONDS + wait_s))
  while :; do
    alive=()
    for p in "${pids[@]}"; do pid_alive "$p" && alive+=("$p"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    [ $SECONDS -ge $deadline ] && break
    sleep 0.2
  done
  log "killing ${alive[*]} (did not stop within ${wait_s} s)"
  kill -KILL "${alive[@]}" 2>/dev/null || true
  deadline=$((SECONDS + 5))
  while [ $SECONDS -lt $deadline ]; do
    local left=0
    for p in "${alive[@]}"; do pid_alive "$p" && left=1; done
    [ $left = 0 ] && return 0
    sleep 0.1
  done
  return 1
}

describe_pids() {
  local p
  for p in "$@"; do
    printf '  %s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-160)"
  done
}
