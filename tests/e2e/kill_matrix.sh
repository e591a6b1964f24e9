#!/usr/bin/env bash
# The kill-point matrix ("Never lose a run"). At each point a run is driven
# into a phase (submit, gate, run, relaunch, restart, continuation, handoff, cancel,
# pool)
# and one victim (the controller, a worker, a rank, one node's slurmd) is
# SIGKILLed at a random moment inside it; what was killed is started again
# (the controller on its port, the slurmd by the cluster script; a worker or a
# rank is the controller's to heal). Then, for every run of the point:
#  - a run the CLI acknowledged exists and reaches a terminal state within
#    KM_TERMINAL_S, the one that matches what happened: CANCELLED after an
#    acknowledged cancel; else SUCCEEDED, or FAILED with its reason once the
#    injected faults used up max_restarts; restarts used never exceed the
#    faults injected (a controller kill costs none);
#  - no attempt has two Slurm jobs (sacct where the cluster has accounting,
#    squeue's memory of finished jobs, and one batch output per attempt);
#  - no launch starts twice (the workers' "rank R started" lines, each
#    rank's own log, the store's launch rows);
#  - no acknowledged step record is missing: the store holds at least the
#    records the controller's /metrics counted as answered "stored" (read just
#    before each kill) and, per attempt, those the workers' logs show stored;
#    a launch's steps have no gap; a SUCCEEDED run has every step, its last
#    launch's from every rank (a worker holds a batch until it is stored, and
#    no controller here stays down as long as a worker's flush at exit);
#  - nothing is left behind: no Slurm job, worker or rank of an ended run.
# The plan comes from the seed alone (printed): a failure replays with it.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: kill_matrix.sh [--points N] [--seed S] [--only I] [--json FILE]
  --points N   points to run (default 10)
  --seed S     the plan's seed (default: random, printed)
  --only I     run point I of the plan alone (a replay)
  --json FILE  write the results and counts as JSON
Needs TRELLIS_BIN and TRELLIS_TEST_CLUSTER (tests/e2e/lib.sh); resets the cluster.
EOF
}

points=10 seed="" only="" json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --points) points=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
[ -n "$seed" ] || seed=$(( $(od -An -N2 -tu2 /dev/urandom) ))
[[ "$points" =~ ^[1-9][0-9]*$ && "$seed" =~ ^[0-9]+$ ]] || { usage >&2; exit 2; }

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kill_matrix_lib.sh"
KM_PY="$KM_HERE/kill_matrix.py"
KM_TERMINAL_S=${KM_TERMINAL_S:-180}
KM_SEED=$seed
# Run ids start again at 1 in every controller database, and Slurm's
# accounting remembers job names for days: a tag of this invocation keeps
# the points' job names apart from those of earlier runs of the matrix.
KM_TAG=$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')
use_clean_cluster
KM_SACCT=0
case "$(scontrol show config 2>/dev/null || true)" in
  *"AccountingStorageType   = accounting_storage/slurmdbd"*) KM_SACCT=1 ;;
esac
log "kill matrix: $points point(s), seed $seed, sacct $KM_SACCT" \
  "(replay: kill_matrix.sh --points $points --seed $seed)"

km_idle_nodes() { sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$' || true; }
KM_NODES=$(sinfo -h -N -o '%N' | sort -u | wc -l)

# Every point starts on idle nodes, all of them: a slurmd just started again
# may still be "not responding".
km_wait_idle() {
  local deadline=$((SECONDS + 90))
  while [ "$(km_idle_nodes)" != "$KM_NODES" ]; do
    if [ $SECONDS -ge $deadline ]; then
      log "nodes not idle after 90 s: $(sinfo -h -N -o '%N:%T' | tr '\n' ' '); resetting"
      "$KM_CLUSTER_CTL" reset "$TRELLIS_TEST_CLUSTER" >/dev/null
      break
    fi
    sleep 0.5
  done
}

km_terminal() { case "$(db "SELECT state FROM runs WHERE run_id='$1'")" in
  SUCCEEDED|FAILED|CANCELLED) return 0 ;; *) return 1 ;; esac; }

# The run's Slurm jobs still queued or running, its workers and ranks alive.
# A job Slurm holds COMPLETING with none of them left is Slurm's own
# bookkeeping (a TERMINATE_JOB sent while a node's slurmd was down is sent
# again a minute later): a note, not something Trellis left behind.
km_run_jobs() {  # ID: the run's jobs in squeue, "ID:NAME:STATE" (attempts' and pool jobs')
  squeue -h -o '%i:%j:%T' 2>/dev/null | grep -E ":trellis-(pool-)?$1\.[0-9]+\.[0-9a-f]+:" || true
}
km_leftovers() {
  local -a left
  mapfile -t left < <(km_run_jobs "$1" | grep -v ':COMPLETING$' || true
                      km_worker_pids "$1"; km_rank_pids "$1")
  echo "${left[*]}"
}

# Waits for every run of the point to end and leave nothing behind.
km_settle() {
  local id deadline left
  for id in "$@"; do
    deadline=$((SECONDS + KM_TERMINAL_S))
    until km_terminal "$id"; do
      if [ $SECONDS -ge $deadline ]; then
        km_violation "$id is $(db "SELECT state FROM runs WHERE run_id='$id'") after" \
          "$KM_TERMINAL_S s: $(db "SELECT state_reason FROM runs WHERE run_id='$id'")"
        trellis cancel "$id" >/dev/null 2>&1 || true
        break
      fi
      sleep 0.3
    done
    deadline=$((SECONDS + 40))
    while left=$(km_leftovers "$id") && [ -n "$left" ]; do
      if [ $SECONDS -ge $deadline ]; then
        km_violation "$id ended but left behind: $left"
        break
      fi
      sleep 0.5
    done
    deadline=$((SECONDS + 10))
    while left=$(km_run_jobs "$id") && [ -n "$left" ] && [ $SECONDS -lt $deadline ]; do
      sleep 0.5
    done
    [ -z "$left" ] || km_note "Slurm still holds ${left//$'\n'/ } (no process of it is left)"
  done
}

# The Slurm jobs named like the point's attempts, "ID|NAME" per line.
km_jobs() {  # SINCE(epoch s)
  squeue -h -t all -o '%i|%j' 2>/dev/null || true
  if [ "$KM_SACCT" = 1 ]; then
    sacct -X -n -P -o JobID,JobName -S "$(date -d "@$1" +%Y-%m-%dT%H:%M:%S)" 2>/dev/null || true
  fi
}

# Every step record the controller answered "stored", in this life and the
# ones it was killed in, is in the store (retention prunes nothing this small).
km_check_claimed() {
  KM_CLAIMED=$((KM_STORED_BEFORE + $(km_stored_claimed)))
  KM_HELD=$(db "SELECT COALESCE(SUM(ranks), 0) FROM steps")
  [ "${KM_HELD:-0}" -ge "$KM_CLAIMED" ] ||
    km_violation "the controller answered $KM_CLAIMED step records stored; the store holds $KM_HELD"
}

km_point() {  # INDEX PHASE VICTIM DELAY_MS DOWN_MS BUDGET
  local i=$1 phase=$2 victim=$3 t0=$SECONDS since id ids flags
  KM_PD="$E2E_DIR/point-$i"
  mkdir -p "$KM_PD/checks"
  KM_NAME="km-$KM_TAG-$i" KM_IDS=() KM_ID="" KM_HIT="" KM_FAULTS=0 KM_CANCELLED=0
  RANDOM=$((KM_SEED * 1000 + i))
  km_wait_idle
  since=$(($(date +%s) - 2))
  log "point $i: $phase, kill the $victim at $4 ms (down $5 ms, budget $6)"
  "km_drive_$phase" "$phase" "$victim" "$4" "$5" "$6"
  [ -n "$CONTROLLER_PID" ] || km_start_controller
  for id in "${KM_IDS[@]}"; do
    trellis show "$id" >/dev/null 2>&1 || km_violation "acknowledged run $id is missing"
  done
  # Runs the CLI never heard of (the controller died before it answered) end too.
  ids=$({ printf '%s\n' "${KM_IDS[@]}"; db "SELECT run_id FROM runs WHERE name='$KM_NAME'"; } |
    sort -u | grep . || true)
  # shellcheck disable=SC2086
  km_settle $ids
  km_jobs "$since" >"$KM_PD/jobs"
  for id in $ids; do
    flags=()
    [ "$KM_CANCELLED" = 0 ] || flags=(--cancelled)
    python3 "$KM_PY" check --db "$E2E_DIR/controller.db" --id "$id" \
      --run-dir "$E2E_DIR/runs/$id" --jobs "$KM_PD/jobs" --steps "$(db \
      "SELECT spec_toml FROM runs WHERE run_id='$id'" | sed -n 's/^STEPS = "\(.*\)"/\1/p')" \
      --world "$KM_WORLD" --faults "$KM_FAULTS" --controller-log "$E2E_DIR/controller.log" \
      "${flags[@]}" >"$KM_PD/checks/$id.json"
  done
  km_check_claimed
  python3 "$KM_PY" result "$KM_PD" point="$i" phase="$phase" victim="$victim" \
    delay_ms="$4" down_ms="$5" budget="$6" hit="$KM_HIT" seconds=$((SECONDS - t0)) \
    acked="${KM_IDS[*]}" faults="$KM_FAULTS" records_claimed_stored="$KM_CLAIMED" \
    records_in_store="$KM_HELD" >>"$E2E_DIR/results.jsonl"
}

t_start=$SECONDS
km_start_controller
: >"$E2E_DIR/results.jsonl"
mapfile -t plan < <(python3 "$KM_PY" plan "$points" "$seed")
for line in "${plan[@]}"; do
  read -r i phase victim delay down budget <<<"$line"
  [ -z "$only" ] || [ "$only" = "$i" ] || continue
  km_point "$i" "$phase" "$victim" "$delay" "$down" "$budget"
done

rc=0
python3 "$KM_PY" summary "$E2E_DIR/results.jsonl" ${json:+--json "$json"} \
  --meta "seed=$seed" --meta "points_planned=$points" --meta "sacct=$KM_SACCT" \
  --meta "seconds=$((SECONDS - t_start))" || rc=$?
log "kill matrix: seed $seed, $((SECONDS - t_start)) s"
if [ "$rc" != 0 ]; then
  KEEP_E2E_DIR=1
  log "FAIL: replay with kill_matrix.sh --points $points --seed $seed [--only POINT]"
fi
exit "$rc"
