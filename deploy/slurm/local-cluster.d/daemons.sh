# local-cluster: starting munged, slurmctld and the slurmd's (detached, with
# the cluster's mark), stopping every daemon and what is left of the cluster,
# and their state (status lines, idle and responding nodes, log tails).
# slurmdbd and MariaDB (--accounting) are in accounting.sh. Sourced by
# deploy/slurm/local-cluster.
# shellcheck shell=bash

# Start a daemon detached from the caller: no inherited fds (a ctest or a
# $(...) capture must not wait on it), a clean environment with the cluster
# mark, cwd in DIR/run.
start_daemon() {
  local out=$1; shift
  (
    cd "$RUN_DIR"
    exec env -i PATH="$(daemon_path)" HOME=/root LANG=C.UTF-8 \
      ${PREFIX:+LD_LIBRARY_PATH="$(prefix_libdirs)"} \
      "$DAEMON_MARK" SLURM_CONF="$SLURM_CONF_FILE" \
      setsid "$@" </dev/null >>"$out" 2>&1 9>&-
  )
}

socket_exists() { [ -S "$MUNGE_SOCKET" ]; }
pidfile_ok() { "$@" >/dev/null; }

start_munged() {
  if munged_pid >/dev/null; then return 0; fi
  mkdir -p "$MUNGE_DIR" "$RUN_DIR" "$LOG_DIR"
  chmod 0700 "$MUNGE_DIR"
  if [ ! -s "$MUNGE_DIR/munge.key" ]; then
    if command -v mungekey >/dev/null 2>&1; then
      mungekey -c -f -b 1024 -k "$MUNGE_DIR/munge.key" >/dev/null
    else
      dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=128 count=1 status=none
    fi
  fi
  chmod 0600 "$MUNGE_DIR/munge.key"
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" "$MUNGE_PID"
  # -f: DIR may sit under a directory without o+x (mktemp -d); every client
  # runs as root here, so munged's accessibility check is only a warning.
  start_daemon "$LOG_DIR/munged.out" munged -f \
    --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
    --pid-file="$MUNGE_PID" --log-file="$LOG_DIR/munged.log" \
    --seed-file="$MUNGE_DIR/munged.seed" --num-threads=4 \
    || { tail_logs; die "munged failed to start"; }
  if ! { wait_for 10 socket_exists && wait_for 5 pidfile_ok munged_pid; }; then
    tail_logs; die "munged did not come up (no socket $MUNGE_SOCKET)"
  fi
}

start_slurmctld() {
  if ctld_pid >/dev/null; then return 0; fi
  mkdir -p "$STATE_DIR"
  rm -f "$CTLD_PID"
  start_daemon "$LOG_DIR/slurmctld.out" slurmctld -f "$SLURM_CONF_FILE" \
    || { tail_logs; die "slurmctld failed to start"; }
  wait_for 15 pidfile_ok ctld_pid || { tail_logs; die "slurmctld did not come up"; }
}

start_slurmd() {
  local n=$1
  if slurmd_pid "$n" >/dev/null; then return 0; fi
  mkdir -p "$SPOOL_DIR/slurmd-$n"
  rm -f "$(slurmd_pidfile "$n")"
  # -d: slurmd otherwise runs the slurmstepd of its build-time path.
  start_daemon "$LOG_DIR/slurmd-$n.out" slurmd -f "$SLURM_CONF_FILE" -N "$n" \
    -d "$(find_program slurmstepd)" \
    || { tail_logs; die "slurmd $n failed to start"; }
}

# Stops every daemon of the cluster and anything else that belongs to DIR;
# fails when a process survives kill -9. Jobs are cancelled before (cmd_down).
stop_cluster() {
  local pids=() n pid
  # The slurmd's, then slurmctld, then munged (Slurm needs munge to shut down).
  # With accounting, slurmdbd after slurmctld (which sends it what it still
  # holds as it stops), then MariaDB (a clean shutdown on TERM).
  for n in $(node_names); do
    if pid=$(slurmd_pid "$n"); then pids+=("$pid"); fi
  done
  [ ${#pids[@]} -eq 0 ] || kill_and_wait 10 "${pids[@]}" || true
  if pid=$(ctld_pid); then kill_and_wait 10 "$pid" || true; fi
  if pid=$(dbd_pid); then kill_and_wait 10 "$pid" || true; fi
  if pid=$(mysqld_pid); then kill_and_wait 30 "$pid" || true; fi

  # Anything else that belongs to DIR (orphaned slurmstepd, job processes).
  local left
  left=$(cluster_pids | tr '\n' ' ')
  if [ -n "${left// /}" ]; then
    # Keep munged for last.
    local mp others=()
    mp=$(munged_pid || true)
    for pid in $left; do [ "$pid" = "$mp" ] || others+=("$pid"); done
    if [ ${#others[@]} -gt 0 ]; then
      log "stopping remaining processes of $DIR: ${others[*]}"
      kill_and_wait 2 "${others[@]}" || true
    fi
  fi
  if pid=$(munged_pid); then kill_and_wait 5 "$pid" || true; fi

  # Check: nothing of ours is left.
  left=$(cluster_pids | tr '\n' ' ')
  if [ -n "${left// /}" ]; then
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    sleep 0.5
    left=$(cluster_pids | tr '\n' ' ')
    if [ -n "${left// /}" ]; then
      echo "$PROG: error: processes of $DIR survived kill -9:" >&2
      # shellcheck disable=SC2086
      describe_pids $left >&2
      exit 1
    fi
  fi
  rm -f "$RUN_DIR"/*.pid "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" "$MYSQLD_SOCKET" 2>/dev/null || true
}

# --------------------------------------------------------------- status --

# Prints one line per daemon; returns 0 if all are running.
daemon_states() {
  local ok=0 pid n
  if pid=$(munged_pid); then echo "munged     running (pid $pid)"; else echo "munged     stopped"; ok=1; fi
  if [ "$ACCOUNTING" = 1 ]; then
    if pid=$(mysqld_pid); then echo "mysqld     running (pid $pid, port $(mysqld_port))"; else echo "mysqld     stopped"; ok=1; fi
    if pid=$(dbd_pid); then echo "slurmdbd   running (pid $pid, port $(dbd_port))"; else echo "slurmdbd   stopped"; ok=1; fi
  fi
  if pid=$(ctld_pid); then echo "slurmctld  running (pid $pid, port $PORT_BASE)"; else echo "slurmctld  stopped"; ok=1; fi
  for n in $(node_names); do
    if pid=$(slurmd_pid "$n"); then
      printf '%-10s running (pid %s, port %s)\n' "slurmd $n" "$pid" "$((PORT_BASE + ${n#node}))"
    else
      printf '%-10s stopped\n' "slurmd $n"; ok=1
    fi
  done
  return $ok
}

any_daemon_running() {
  local n
  munged_pid >/dev/null && return 0
  mysqld_pid >/dev/null && return 0
  dbd_pid >/dev/null && return 0
  ctld_pid >/dev/null && return 0
  for n in $(node_names); do slurmd_pid "$n" >/dev/null && return 0; done
  return 1
}

all_daemons_running() {
  local n
  munged_pid >/dev/null || return 1
  if [ "$ACCOUNTING" = 1 ]; then
    mysqld_pid >/dev/null || return 1
    dbd_pid >/dev/null || return 1
  fi
  ctld_pid >/dev/null || return 1
  for n in $(node_names); do slurmd_pid "$n" >/dev/null || return 1; done
  return 0
}

idle_count() {
  sl timeout 10 sinfo -h -N -p "$PARTITION" -o '%N %T' 2>/dev/null | awk '$2 == "idle" { n++ } END { print n + 0 }'
}

tail_logs() {
  local f
  for f in "$LOG_DIR"/*.log "$LOG_DIR"/*.out; do
    [ -s "$f" ] || continue
    echo "----- tail of $f" >&2
    tail -n 15 "$f" >&2
  done
}

# Number of nodes that respond to slurmctld: any state but down, unknown or
# not responding ("*"); drained or allocated nodes count.
responding_count() {
  sl timeout 10 sinfo -h -N -p "$PARTITION" -o '%N %T' 2>/dev/null \
    | awk '$2 !~ /down|fail|unknown|not_responding|future|\*/ { n++ } END { print n + 0 }'
}

ctld_answers() {
  sl timeout 10 sinfo -h -o '%P' >/dev/null 2>&1
}
