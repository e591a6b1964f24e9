# shellcheck shell=bash disable=SC2034  # KM_* variables are read by kill_matrix.sh
# The kill-point matrix's drivers (sourced by kill_matrix.sh after lib.sh):
# bring a run into a phase, kill the victim at the point's moment, bring back
# what was killed. Each driver sets KM_IDS (runs whose submit the CLI
# acknowledged), KM_HIT (what was killed, empty when the victim was absent),
# KM_FAULTS (faults that may fail a launch: the phase's own trigger and a
# killed worker, rank or slurmd; a controller kill must cost the run nothing)
# and KM_CANCELLED (1 once `trellis cancel` was acknowledged).
KM_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KM_STEPS_PY=$KM_HERE/steps.py
KM_CLUSTER_CTL=$KM_HERE/../../deploy/slurm/local-cluster
# A struck node comes back after 5 s: four nodes must serve the whole matrix.
KM_CTL_FLAGS=(--quarantine-s 5 --probation-s 0 --metrics-port-file "$E2E_DIR/metrics-port")
# Step records the controller answered "stored" in the lives it was killed in
# (read from its /metrics just before each kill: a lower bound).
KM_STORED_BEFORE=0
KM_STEP_S=0.1
KM_WORLD=4  # 2 nodes x 2 ranks (and a spare node)
# Rank 1 of attempt 1's launch 1 exits 3 after KM_FAIL_AT steps when set (not
# 0): the failure that takes a run into a relaunch or a new attempt.
KM_CMD="case \$TRELLIS_ATTEMPT.\$TRELLIS_LAUNCH.\$RANK.\$KM_FAIL_AT in 1.1.1.0) ;;
1.1.1.*) export STEPS=\$KM_FAIL_AT EXIT_CODE=3 ;; esac; exec python3 $KM_STEPS_PY"

km_sleep_ms() { [ "$1" -le 0 ] || sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
db() { sqlite3 -cmd ".timeout 5000" "$E2E_DIR/controller.db" "$@" 2>/dev/null || true; }
km_start_controller() { start_controller "${KM_CTL_FLAGS[@]}"; }

# The step records this controller says it stored: its own count of the
# records of the batches it answered STORED (trellis_ingest_records_total).
km_stored_claimed() {
  local port
  port=$(cat "$E2E_DIR/metrics-port" 2>/dev/null) || { echo 0; return; }
  curl -fsS --max-time 2 "http://127.0.0.1:$port/metrics" 2>/dev/null |
    awk '$1 == "trellis_ingest_records_total{result=\"stored\"}" { n = $2 }
         END { printf "%d\n", n }' || true  # 0 when it does not answer
}

# km_until TIMEOUT_S WHAT CMD...: polls CMD (every 50 ms: the phases last
# seconds), so that a trigger is seen within a step of the ranks.
km_until() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      km_violation "timed out waiting for $what"
      return 1
    fi
    sleep 0.05
  done
}

# A broken invariant of the point (KM_PD: the point's directory), and a note.
km_violation() { echo "$*" >>"${KM_PD:?}/violations.txt"; log "violation: $*"; }
km_note() { echo "$*" >>"${KM_PD:?}/notes.txt"; log "note: $*"; }

# km_spec STEPS MAX_RESTARTS RELAUNCH FAIL_AT -> path. Every point's run has a
# spare node, no backoff, and heartbeats that time out in 5 s (the fastest
# notice of a lost worker the spec allows).
km_spec() {
  write_spec "$KM_NAME" "$KM_CMD" 'spare_nodes = 1' '[restart]' "max_restarts = $2" \
    'backoff_s = 0' 'heartbeat_timeout_s = 5' "relaunch_in_allocation = $3" \
    '[env]' "STEPS = \"$1\"" "STEP_S = \"$KM_STEP_S\"" "KM_FAIL_AT = \"$4\""
}

km_submit() {  # SPEC: submits and records the acknowledged id
  local id
  id=$(trellis submit "$1") || { km_violation "submit refused with the controller up"; return 1; }
  KM_IDS+=("$id")
  KM_ID=$id
}

km_latest_job() {  # the run's current attempt's (not one waiting ahead)
  db "SELECT slurm_job_id FROM attempts WHERE run_id='$1' AND waiting = 0 ORDER BY attempt DESC LIMIT 1"
}
km_running_with_steps() {  # ID MIN_STEPS
  local n
  [ "$(db "SELECT state FROM runs WHERE run_id='$1'")" = RUNNING ] || return 1
  n=$(db "SELECT COUNT(*) FROM steps WHERE run_id='$1'")
  [ "${n:-0}" -ge "$2" ]
}
km_worker_pids() { our_worker_pids "$1"; }
km_rank_pids() {  # ID: the run's rank processes (steps.py, by their TRELLIS_RUN)
  local p
  for p in $(pgrep -f "python3 $KM_STEPS_PY" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -x >/dev/null "TRELLIS_RUN=$1" &&
      is_our_rank "$p"; then echo "$p"; fi
  done
  return 0
}
km_batch_log_has() {  # ID ATTEMPT TEXT: the attempt's batch output (its workers' logs) has TEXT
  grep -qsF "$3" "$E2E_DIR/runs/$1/attempt-$2"/slurm-*.out
}
km_has_workers() { [ -n "$(km_worker_pids "$1")" ]; }
# km_pick VAR ITEM...: VAR = one of the items (empty without any), drawn from
# RANDOM in this shell, which kill_matrix.sh seeds per point.
km_pick() {
  local var=$1
  shift
  if [ $# -eq 0 ]; then printf -v "$var" '%s' ""; return; fi
  printf -v "$var" '%s' "${@:$((RANDOM % $# + 1)):1}"
}

km_run_nodes() {  # ID: the nodes of the run's latest Slurm job (every node when none runs)
  local job nodes=""
  job=$(km_latest_job "$1")
  [ -z "$job" ] || nodes=$(squeue -h -j "$job" -o %N 2>/dev/null || true)
  if [ -n "$nodes" ]; then scontrol show hostnames "$nodes"; else sinfo -h -N -o %N | sort -u; fi
}

# km_kill VICTIM ID: SIGKILLs the victim (a worker or a rank of the run
# chosen at random; that node's slurmd; the controller). A worker or rank that
# does not exist yet is waited for, up to 5 s; then the victim was absent.
km_kill() {
  local victim=$1 id=$2 pid="" node deadline=$((SECONDS + 5))
  local -a found
  KM_HIT=""
  case "$victim" in
    controller)
      KM_STORED_BEFORE=$((KM_STORED_BEFORE + $(km_stored_claimed)))
      KM_HIT="controller pid $CONTROLLER_PID"
      stop_controller KILL
      ;;
    worker|rank)
      while :; do
        if [ "$victim" = worker ]; then
          mapfile -t found < <(km_worker_pids "$id" | sort -n)
        else
          mapfile -t found < <(km_rank_pids "$id" | sort -n)
        fi
        km_pick pid "${found[@]}"
        [ -n "$pid" ] || [ $SECONDS -ge $deadline ] || { sleep 0.05; continue; }
        break
      done
      [ -n "$pid" ] || return 0
      node=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^SLURMD_NODENAME=//p')
      if kill -KILL "$pid" 2>/dev/null; then
        KM_HIT="$victim pid $pid on ${node:-?}"
        KM_FAULTS=$((KM_FAULTS + 1))
      fi
      ;;
    slurmd)
      mapfile -t found < <(km_run_nodes "$id")
      km_pick node "${found[@]}"
      pid=$(cat "$TRELLIS_TEST_CLUSTER/run/slurmd-$node.pid" 2>/dev/null || true)
      if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmd ] &&
        kill -KILL "$pid" 2>/dev/null; then
        KM_HIT="slurmd of $node (pid $pid)"
        KM_FAULTS=$((KM_FAULTS + 1))
      fi
      ;;
  esac
  log "killed: ${KM_HIT:-nothing, the $victim was absent}"
}

# km_revive VICTIM DOWN_MS: starts again what was killed, after DOWN_MS. The
# controller keeps its port (workers and batch scripts dial it); a slurmd is
# started the way the cluster script starts a missing daemon. A killed worker
# or rank is the controller's to heal.
km_revive() {
  case "$1" in
    controller) km_sleep_ms "$2"; km_start_controller ;;
    slurmd)
      km_sleep_ms "$2"
      "$KM_CLUSTER_CTL" up "$TRELLIS_TEST_CLUSTER" >/dev/null ||
        km_violation "the cluster script could not start the slurmd again"
      ;;
  esac
  return 0
}

km_strike() {  # VICTIM ID DOWN_MS: the point's kill and the revival
  km_kill "$1" "$2"
  [ -z "$KM_HIT" ] || km_revive "$1" "$3"
}

# ---- drivers: PHASE VICTIM DELAY_MS DOWN_MS BUDGET ------------------------
# BUDGET 1: the run has no restart to spare for the victim's fault.

# submit: the victim dies DELAY after `trellis submit` starts (controller:
# before, while or after it stores the run, writes the attempt ahead, calls
# sbatch, stores the job id; slurmd: while Slurm starts the batch script).
km_drive_submit() {
  local spec rc=0 pid
  spec=$(km_spec 30 "$((2 - 2 * $5))" true 0)
  (trellis submit "$spec" >"$KM_PD/submit.out" 2>"$KM_PD/submit.err") &
  pid=$!
  km_sleep_ms "$3"
  km_strike "$2" "${KM_IDS[0]:-$KM_NAME}" "$4"
  wait "$pid" || rc=$?
  if [ "$rc" = 0 ]; then
    KM_IDS+=("$(cat "$KM_PD/submit.out")")
  else
    log "submit not acknowledged (exit $rc): $(head -c 200 "$KM_PD/submit.err")"
  fi
}

# gate: from the first worker of the allocation (registering, waiting for the
# gate's decision) until GO.
km_drive_gate() {
  km_submit "$(km_spec 30 "$((2 - 2 * $5))" true 0)" || return 0
  km_until 60 "a worker of $KM_ID" km_has_workers "$KM_ID" || return 0
  km_sleep_ms "$3"
  km_strike "$2" "$KM_ID" "$4"
}

# run: a launch running and reporting steps.
km_drive_run() {
  km_submit "$(km_spec 60 "$((2 - 2 * $5))" true 0)" || return 0
  km_until 90 "$KM_ID running with steps" km_running_with_steps "$KM_ID" 1 || return 0
  km_sleep_ms "$3"
  km_strike "$2" "$KM_ID" "$4"
}

# relaunch (RELAUNCH true) and restart (false: a new attempt, a new Slurm
# job): from the exit of the failing rank through the new launch's start.
km_drive_recovery() {
  local relaunch=$1
  shift
  km_submit "$(km_spec 40 "$((3 - 2 * $5))" "$relaunch" 10)" || return 0
  KM_FAULTS=$((KM_FAULTS + 1))
  km_until 90 "rank 1 of $KM_ID to fail" km_batch_log_has "$KM_ID" 1 "rank 1 exited with 3" ||
    return 0
  km_sleep_ms "$3"
  km_strike "$2" "$KM_ID" "$4"
}
km_drive_relaunch() { km_drive_recovery true "$@"; }
km_drive_restart() { km_drive_recovery false "$@"; }

# continuation: Slurm's wall-time warning, as Slurm sends it (USR1 to the
# batch script), then the checkpoint, the time-limit stop and the new attempt.
km_drive_continuation() {
  km_submit "$(km_spec 60 "$((2 - 2 * $5))" true 0)" || return 0
  km_until 90 "$KM_ID running with steps" km_running_with_steps "$KM_ID" 5 || return 0
  scancel --batch --signal=USR1 "$(km_latest_job "$KM_ID")" ||
    { km_violation "scancel --batch --signal=USR1 failed"; return 0; }
  km_sleep_ms "$3"
  km_strike "$2" "$KM_ID" "$4"
}

# handoff: a continuation waiting ahead takes over (a 3-minute limit, the next
# attempt eligible 90 s before it, Slurm's warning 10 s before it but maybe a
# minute sooner: still after the handoff): from the controller's word that
# the waiting attempt passed the gate, through the current ranks' stop at a
# step boundary, to the new attempt's GO (about half a second on this cluster).
km_drive_handoff() {
  local spec
  spec=$(km_spec 1200 "$((2 - 2 * $5))" true 0)
  sed -i -e 's/^spare_nodes = 1$/spare_nodes = 1\ntime_limit = 3\nsignal_grace_s = 10/' \
    -e 's/^\[restart\]$/[restart]\ncontinuation_lead_s = 90/' "$spec"
  km_submit "$spec" || return 0
  km_until 150 "the handoff of $KM_ID" grep -q "run $KM_ID: handoff: " "$E2E_DIR/controller.log" ||
    return 0
  km_sleep_ms "$3"
  km_strike "$2" "$KM_ID" "$4"
}

# pool: a relaunch that draws the run's spare pool job (no spare in the
# allocation, a pool of one node): a worker of the run is killed once the pool
# stands, and the victim dies DELAY later: through the relaunch's decision, the
# draw stored, the pool standby worker told to leave, the pool node's step in
# the pool job (srun --jobid), its gate and the refill's sbatch and standby.
km_pool_stands() {  # ID
  [ -n "$(db "SELECT standing_ms FROM pool_jobs WHERE run_id='$1' AND standing_ms IS NOT NULL LIMIT 1")" ]
}
km_drive_pool() {
  local spec pid
  spec=$(km_spec 60 "$((3 - 2 * $5))" true 0)
  sed -i -e 's/^spare_nodes = 1$/spare_nodes = 0/' \
    -e 's/^\[restart\]$/[restart]\nspare_pool_nodes = 1/' "$spec"
  km_submit "$spec" || return 0
  km_until 90 "$KM_ID running with steps" km_running_with_steps "$KM_ID" 3 || return 0
  km_until 60 "the spare pool of $KM_ID to stand" km_pool_stands "$KM_ID" || return 0
  km_pick pid $(km_worker_pids "$KM_ID")
  [ -n "$pid" ] || { km_note "no worker of $KM_ID to fail"; return 0; }
  kill -KILL "$pid" 2>/dev/null && KM_FAULTS=$((KM_FAULTS + 1))
  log "the fault: killed worker pid $pid; the relaunch draws the pool"
  km_sleep_ms "$3"
  km_strike "$2" "$KM_ID" "$4"
}

# cancel: `trellis cancel` at DELAY before (negative) or after the kill. A
# cancel the controller did not acknowledge is sent again once it is back, as
# a user would.
km_drive_cancel() {
  local pid rc=0 deadline before=$((-$3)) down=$4
  km_submit "$(km_spec 600 2 true 0)" || return 0
  km_until 90 "$KM_ID running with steps" km_running_with_steps "$KM_ID" 1 || return 0
  if [ "$3" -ge 0 ]; then
    (trellis cancel "$KM_ID" >/dev/null 2>&1) &
    pid=$!
    km_sleep_ms "$3"
    km_strike "$2" "$KM_ID" "$down"
  else
    km_kill "$2" "$KM_ID"
    [ -n "$KM_HIT" ] || down=$before
    if [ "$before" -lt "$down" ]; then  # the cancel while the victim is down
      km_sleep_ms "$before"
      (trellis cancel "$KM_ID" >/dev/null 2>&1) &
      pid=$!
      km_sleep_ms $((down - before))
      [ -z "$KM_HIT" ] || km_revive "$2" 0
    else
      km_sleep_ms "$down"
      [ -z "$KM_HIT" ] || km_revive "$2" 0
      km_sleep_ms $((before - down))
      (trellis cancel "$KM_ID" >/dev/null 2>&1) &
      pid=$!
    fi
  fi
  wait "$pid" || rc=$?
  deadline=$((SECONDS + 30))
  while [ "$rc" != 0 ] && [ $SECONDS -lt $deadline ]; do
    log "cancel not acknowledged (exit $rc): again"
    sleep 0.5
    rc=0
    trellis cancel "$KM_ID" >/dev/null 2>&1 || rc=$?
  done
  if [ "$rc" = 0 ]; then KM_CANCELLED=1; else km_violation "cancel not acknowledged within 30 s"; fi
}
