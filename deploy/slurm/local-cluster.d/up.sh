# local-cluster up: its options, the checks of a shape against a running
# cluster, a fresh start (leftovers and ports checked, DIR's state emptied,
# files rendered, fixtures installed) or the restart of missing daemons, and
# the wait for every node. Sourced by deploy/slurm/local-cluster.
# shellcheck shell=bash

cmd_up() {
  local dir_arg=${1:-}; shift || true
  local want_nodes='' want_port='' want_cpus='' want_gpus='' want_host_sysfs='' want_prefix=''
  local want_acct='' want_share='' want_qw='' want_qw_sigma='' want_qw_seed=''
  while [ $# -gt 0 ]; do
    case "$1" in
      --accounting) want_acct=1; shift;;
      --queue-wait) want_qw=${2:-}; shift 2 || die "--queue-wait needs a median in seconds";;
      --queue-wait=*) want_qw=${1#*=}; shift;;
      --queue-wait-sigma) want_qw_sigma=${2:-}; shift 2 || die "--queue-wait-sigma needs a value";;
      --queue-wait-sigma=*) want_qw_sigma=${1#*=}; shift;;
      --queue-wait-seed) want_qw_seed=${2:-}; shift 2 || die "--queue-wait-seed needs a value";;
      --queue-wait-seed=*) want_qw_seed=${1#*=}; shift;;
      --gpus-per-node) want_gpus=${2:-}; shift 2 || die "--gpus-per-node needs a value";;
      --gpus-per-node=*) want_gpus=${1#*=}; shift;;
      --host-sysfs) want_host_sysfs=1; shift;;
      --share-gpus) want_share=1; shift;;
      --prefix) want_prefix=${2:-}; shift 2 || die "--prefix needs a value";;
      --prefix=*) want_prefix=${1#*=}; shift;;
      --nodes) want_nodes=${2:-}; shift 2 || die "--nodes needs a value";;
      --nodes=*) want_nodes=${1#*=}; shift;;
      --port-base) want_port=${2:-}; shift 2 || die "--port-base needs a value";;
      --port-base=*) want_port=${1#*=}; shift;;
      --cpus) want_cpus=${2:-}; shift 2 || die "--cpus needs a value";;
      --cpus=*) want_cpus=${1#*=}; shift;;
      -h|--help) usage; exit 0;;
      *) die "up: unknown option '$1' (see --help)";;
    esac
  done
  [ -z "$want_nodes" ] || [[ "$want_nodes" =~ ^[1-9][0-9]?$ ]] || die "--nodes must be 1..99"
  [ -z "$want_cpus" ] || [[ "$want_cpus" =~ ^[1-9][0-9]*$ ]] || die "--cpus must be a positive integer"
  [ -z "$want_gpus" ] || [[ "$want_gpus" =~ ^[0-9]+$ ]] || die "--gpus-per-node must be 0 or a positive integer"
  check_queue_wait_options "$want_qw" "$want_qw_sigma" "$want_qw_seed"
  if [ -n "$want_prefix" ]; then
    [ -d "$want_prefix/usr/sbin" ] || die "--prefix $want_prefix holds no usr/sbin (unpack the staged packages there: deploy/gpu/unpack-prefix.sh)"
    want_prefix=$(cd "$want_prefix" && pwd -P)
    [[ "$want_prefix" =~ ^[A-Za-z0-9/._+-]+$ ]] || die "--prefix '$want_prefix' has characters slurm.conf cannot hold"
  fi
  if [ -n "$want_port" ]; then
    if ! { [[ "$want_port" =~ ^[1-9][0-9]*$ ]] && [ "$want_port" -ge 1024 ] && [ "$want_port" -le 65000 ]; }; then
      die "--port-base must be 1024..65000"
    fi
  fi
  require_root
  local dir; dir=$(resolve_dir "$dir_arg" 1)
  set_paths "$dir"
  mkdir -p "$CONF_DIR" "$RUN_DIR" "$LOG_DIR"
  exec 9>"$DIR/.lock"
  flock -w 120 9 || die "another $PROG command holds $DIR/.lock"
  local t0=$SECONDS
  load_shape
  # A running cluster keeps its own binaries and accounting; a fresh one
  # takes --prefix and --accounting.
  if [ -z "$NODES" ] || ! any_daemon_running; then
    PREFIX=$want_prefix
    ACCOUNTING=${want_acct:-0}
  fi
  require_binaries
  # --queue-wait as asked, its defaults filled in (compared with a running
  # cluster's below; taken by a fresh one).
  if [ -n "$want_qw" ]; then
    want_qw_sigma=${want_qw_sigma:-$QUEUE_WAIT_SIGMA_DEFAULT}
    want_qw_seed=${want_qw_seed:-$QUEUE_WAIT_SEED_DEFAULT}
  fi

  if [ -n "$NODES" ] && all_daemons_running && ctld_answers; then
    local mismatch=
    [ -n "$want_nodes" ] && [ "$want_nodes" != "$NODES" ] && mismatch+=" nodes=$NODES"
    [ -n "$want_port" ] && [ "$want_port" != "$PORT_BASE" ] && mismatch+=" port-base=$PORT_BASE"
    [ -n "$want_cpus" ] && [ "$want_cpus" != "$CPUS" ] && mismatch+=" cpus=$CPUS"
    [ -n "$want_gpus" ] && [ "$want_gpus" != "$GPUS_PER_NODE" ] && mismatch+=" gpus-per-node=$GPUS_PER_NODE"
    [ -n "$want_share" ] && [ "$SHARE_GPUS" != 1 ] && mismatch+=" no share-gpus"
    [ -n "$want_acct" ] && [ "$ACCOUNTING" != 1 ] && mismatch+=" no accounting"
    mismatch+=$(queue_wait_mismatch "$want_qw" "$want_qw_sigma" "$want_qw_seed")
    [ -z "$mismatch" ] || die "the cluster in $DIR is already up with a different shape:$mismatch (run '$PROG down $DIR' first)"
    write_env
    log "already up: $NODES nodes, slurmctld on port $PORT_BASE ($DIR)"
    log "use it with: . $ENV_FILE"
    return 0
  fi

  local fresh=1
  if [ -n "$NODES" ] && any_daemon_running; then
    # Partially up (a daemon died): restart what is missing, keep state.
    local mismatch=
    [ -n "$want_nodes" ] && [ "$want_nodes" != "$NODES" ] && mismatch+=" nodes=$NODES"
    [ -n "$want_port" ] && [ "$want_port" != "$PORT_BASE" ] && mismatch+=" port-base=$PORT_BASE"
    [ -n "$want_cpus" ] && [ "$want_cpus" != "$CPUS" ] && mismatch+=" cpus=$CPUS"
    [ -n "$want_acct" ] && [ "$ACCOUNTING" != 1 ] && mismatch+=" no accounting"
    mismatch+=$(queue_wait_mismatch "$want_qw" "$want_qw_sigma" "$want_qw_seed")
    [ -z "$mismatch" ] || die "the cluster in $DIR is partly up with a different shape:$mismatch (run '$PROG down $DIR' first)"
    fresh=0
    log "partly up: restarting the daemons that are missing"
  fi

  if [ $fresh = 1 ]; then
    NODES=${want_nodes:-$DEFAULT_NODES}
    PORT_BASE=${want_port:-$DEFAULT_PORT_BASE}
    CPUS=${want_cpus:-$(nproc 2>/dev/null || echo 2)}
    GPUS_PER_NODE=${want_gpus:-0}
    HOST_SYSFS=${want_host_sysfs:-0}
    SHARE_GPUS=${want_share:-0}
    QUEUE_WAIT_MEDIAN_S=$want_qw QUEUE_WAIT_SIGMA=$want_qw_sigma QUEUE_WAIT_SEED=$want_qw_seed
    if queue_wait_on; then require_job_submit_lua; fi
    [ "$SHARE_GPUS" = 0 ] || [ "$GPUS_PER_NODE" -gt 0 ] ||
      die "--share-gpus shares the GPUs of --gpus-per-node G among the nodes; give G > 0"
    if [ "$GPUS_PER_NODE" -gt 0 ]; then
      local have need=$((NODES * GPUS_PER_NODE))
      have=$(ls "$GPU_DEV_DIR"/nvidia[0-9]* 2>/dev/null | wc -l)
      local hint="; --share-gpus gives every node the same $GPUS_PER_NODE"
      [ "$SHARE_GPUS" = 1 ] && need=$GPUS_PER_NODE hint=
      [ "$need" -le "$have" ] ||
        die "$NODES nodes x $GPUS_PER_NODE GPUs need $need GPUs; this host has $have ($GPU_DEV_DIR/nvidiaN)$hint"
    fi
    [ "$(last_port)" -le 65535 ] || die "ports $PORT_BASE..$(last_port) exceed 65535"
    # Leftovers of a crash (orphaned slurmstepd's, job processes) go first.
    local left
    left=$(cluster_pids | tr '\n' ' ')
    if [ -n "${left// /}" ]; then
      log "stopping leftovers of an earlier run: $left"
      # shellcheck disable=SC2086
      kill_and_wait 2 $left || true
    fi
    local p last; last=$(last_port)
    for ((p = PORT_BASE; p <= last; p++)); do
      if port_in_use "$p"; then
        die "port $p on 127.0.0.1 is in use (another cluster or service?); pick another --port-base"
      fi
    done
    rm -rf "$RUN_DIR" "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR" "$NODES_DIR" "$DB_DIR"
    mkdir -p "$RUN_DIR" "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR" "$NODES_DIR"
    chmod 0755 "$RUN_DIR" "$SPOOL_DIR" "$LOG_DIR" "$NODES_DIR"
    write_config
    local def n; def=$(default_fixture_dir)
    for n in $(node_names); do install_fixture "$n" "$def"; done
    log "starting $NODES nodes in $DIR (slurmctld port $PORT_BASE, slurmd ports $((PORT_BASE + 1))-$((PORT_BASE + NODES)), $CPUS CPUs per node)"
    if [ "$ACCOUNTING" = 1 ]; then
      log "with accounting: slurmdbd port $(dbd_port), mysqld port $(mysqld_port) (datadir $DB_DIR)"
    fi
    if queue_wait_on; then
      log "with queue waits: lognormal, median $QUEUE_WAIT_MEDIAN_S s, sigma $QUEUE_WAIT_SIGMA, seed $QUEUE_WAIT_SEED ($CONF_DIR/job_submit.lua, draws in $(queue_wait_log))"
    fi
  else
    write_env
  fi

  start_munged
  # Accounting first: slurmctld registers with slurmdbd as it starts.
  local acct_s=0
  if [ "$ACCOUNTING" = 1 ]; then
    local ta=$SECONDS
    start_mysqld
    start_slurmdbd
    acct_register
    acct_s=$((SECONDS - ta))
    log "accounting up in $acct_s s (slurmdbd port $(dbd_port), mysqld port $(mysqld_port))"
  fi
  start_slurmctld
  local n
  for n in $(node_names); do
    [ -d "$NODES_DIR/$n/sysfs" ] || install_fixture "$n" "$(default_fixture_dir)"
    start_slurmd "$n"
  done

  # A fresh cluster waits for every node idle; a restarted one for every node
  # to answer again (a test may have drained one, or left jobs running).
  local deadline=$((t0 + acct_s + UP_TIMEOUT_S)) ready=0 what=idle
  [ $fresh = 1 ] || what=responding
  while :; do
    if [ $fresh = 1 ]; then ready=$(idle_count); else ready=$(responding_count); fi
    [ "$ready" -eq "$NODES" ] && break
    if [ $SECONDS -ge $deadline ]; then
      echo "$PROG: error: only $ready of $NODES nodes $what after ${UP_TIMEOUT_S} s" >&2
      daemon_states >&2 || true
      sl timeout 10 sinfo -N >&2 2>&1 || true
      tail_logs
      exit 1
    fi
    sleep 0.2
  done
  log "up: $NODES nodes $what in $((SECONDS - t0)) s"
  log "use it with: . $ENV_FILE"
}
