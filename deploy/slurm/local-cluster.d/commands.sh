# local-cluster down, reset, status and env. Sourced by
# deploy/slurm/local-cluster.
# shellcheck shell=bash

# cancel_all_jobs SECONDS: scancel every job, wait until none is left running.
cancel_all_jobs() {
  local jobs deadline=$((SECONDS + $1))
  jobs=$(sl timeout 10 squeue -h -o '%i' 2>/dev/null | tr '\n' ' ' || true)
  [ -n "${jobs// /}" ] || return 0
  log "cancelling jobs: $jobs"
  # shellcheck disable=SC2086
  sl timeout 10 scancel $jobs 2>/dev/null || true
  while [ $SECONDS -lt $deadline ]; do
    [ -z "$(sl timeout 10 squeue -h -o '%i' 2>/dev/null)" ] && return 0
    sleep 0.3
  done
  log "jobs still in the queue after $1 s: $(sl timeout 10 squeue -h -o '%i:%T' 2>/dev/null | tr '\n' ' ')"
  return 1
}

cmd_down() {
  local dir_arg=${1:-}; shift || true
  [ $# -eq 0 ] || die "down: unexpected arguments: $*"
  require_root
  local dir; dir=$(resolve_dir "$dir_arg" 0)
  set_paths "$dir"
  if [ ! -d "$DIR" ]; then
    log "nothing to stop: $DIR does not exist"
    return 0
  fi
  local t0=$SECONDS
  exec 9>"$DIR/.lock"
  flock -w 120 9 || die "another $PROG command holds $DIR/.lock"
  load_shape
  [ -n "$NODES" ] || NODES=0

  # Cancel every job while slurmctld can still do it, then stop everything.
  if [ -f "$SLURM_CONF_FILE" ] && ctld_pid >/dev/null; then cancel_all_jobs 15; fi
  stop_cluster
  log "down ($DIR) in $((SECONDS - t0)) s"
}

cmd_reset() {
  local dir_arg=${1:-}; shift || true
  [ $# -eq 0 ] || die "reset: unexpected arguments: $*"
  require_root
  local dir; dir=$(resolve_dir "$dir_arg" 0)
  set_paths "$dir"
  [ -f "$SHAPE_FILE" ] || die "no cluster in $DIR (run '$PROG up $DIR' first)"
  load_shape
  if ! { all_daemons_running && ctld_answers; }; then
    die "the cluster in $DIR is not up (run '$PROG up $DIR')"
  fi
  exec 9>"$DIR/.lock"
  flock -w 120 9 || die "another $PROG command holds $DIR/.lock"
  local t0=$SECONDS n def
  cancel_all_jobs 20 || die "could not cancel every job"
  # Drained or down nodes back to service.
  local bad
  bad=$(sl timeout 10 sinfo -h -N -p "$PARTITION" -o '%N %T' | awk '$2 ~ /drain|down|fail/ { print $1 }' | sort -u | paste -sd, -)
  if [ -n "$bad" ]; then
    log "resuming $bad"
    sl timeout 10 scontrol update nodename="$bad" state=resume 2>/dev/null || true
  fi
  def=$(default_fixture_dir)
  for n in $(node_names); do install_fixture "$n" "$def"; done
  local deadline=$((SECONDS + 30)) idle
  while :; do
    idle=$(idle_count)
    [ "$idle" -eq "$NODES" ] && break
    if [ $SECONDS -ge $deadline ]; then
      sl timeout 10 sinfo -N >&2 || true
      die "only $idle of $NODES nodes idle after reset"
    fi
    sleep 0.2
  done
  log "reset: no jobs, $NODES nodes idle, default fixtures ($((SECONDS - t0)) s)"
}

cmd_status() {
  local dir_arg=${1:-}; shift || true
  [ $# -eq 0 ] || die "status: unexpected arguments: $*"
  local dir; dir=$(resolve_dir "$dir_arg" 0)
  set_paths "$dir"
  if [ ! -f "$SHAPE_FILE" ]; then
    echo "no cluster in $DIR (never started)"
    return 1
  fi
  load_shape
  echo "cluster $DIR: $NODES nodes, ports $PORT_BASE-$(last_port), $CPUS CPUs per node$([ "$GPUS_PER_NODE" -gt 0 ] && echo ", $GPUS_PER_NODE GPUs per node")$([ "$SHARE_GPUS" = 1 ] && echo " (shared)")$([ "$HOST_SYSFS" = 1 ] && echo ", host sysfs")${PREFIX:+, Slurm from $PREFIX}$([ "$ACCOUNTING" = 1 ] && echo ", accounting (slurmdbd port $(dbd_port), mysqld port $(mysqld_port))")$(queue_wait_on && echo ", queue waits (median $QUEUE_WAIT_MEDIAN_S s, sigma $QUEUE_WAIT_SIGMA, seed $QUEUE_WAIT_SEED)")"
  local rc=0
  daemon_states || rc=1
  if ctld_pid >/dev/null; then
    echo
    sl timeout 10 sinfo -N -o '%N %P %T %c %m' 2>&1 || rc=1
    local njobs
    njobs=$(sl timeout 10 squeue -h 2>/dev/null | wc -l || echo '?')
    echo "jobs in queue: $njobs"
  fi
  if [ $rc = 0 ]; then echo "state: up"; else echo "state: down or partial"; fi
  return $rc
}

cmd_env() {
  local dir; dir=$(resolve_dir "${1:-}" 0)
  set_paths "$dir"
  [ -f "$ENV_FILE" ] || die "no env file in $DIR (run '$PROG up $DIR')"
  cat "$ENV_FILE"
}
