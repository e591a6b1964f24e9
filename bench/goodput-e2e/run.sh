#!/usr/bin/env bash
# bench/goodput-e2e: one run, three ways, on the local Slurm cluster, with the
# same faults and the same queue waits: Trellis with its goodput mechanisms
# ("on"), Trellis with them off ("off"), and plain resubmission ("plain").
# Each variant has a local cluster of its own (deploy/slurm/local-cluster up
# --queue-wait: every job waits in the queue as on a busy partition) and a
# controller of its own; the three runs go at once. A fault injector per
# variant (inject.py) kills a rank, kills a worker or stops a rank (a hang),
# in turn, every ~FAULT_EVERY_S seconds of the run's running time, from one
# seeded schedule. At the end each controller's own accounting (`trellis
# show --json`: goodput, state seconds, attempts, launches) goes into
# bench/results/goodput-e2e-<date>[-TAG].{md,json} (report.py). README.md
# beside this file says what each variant sets and why.
#
#   bench/goodput-e2e/run.sh                         # the full bench: ~20 min of work
#   bench/goodput-e2e/run.sh --work-s 240 --time-limit-min 2 --fault-every-s 70 --queue-wait-s 20 --tag short
#
# Needs root (the local cluster does), python3 and sqlite3. TRELLIS_BIN: the
# binaries (default build/bin).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CLUSTER=$REPO/deploy/slurm/local-cluster
TRELLIS_BIN=${TRELLIS_BIN:-$REPO/build/bin}
case "$TRELLIS_BIN" in /*) ;; *) TRELLIS_BIN=$PWD/$TRELLIS_BIN ;; esac  # the workers need it absolute

WORK_S=1200          # seconds of work (STEPS x STEP_S)
STEP_S=0.5
CKPT_COST_S=5        # what a checkpoint costs the steps
FIXED_EVERY_S=120    # "off" and "plain": a checkpoint every this many seconds of steps
TIME_LIMIT_MIN=4
GRACE_S=30           # slurm.signal_grace_s
HANG_TIMEOUT_S=60
FAULT_EVERY_S=180
QUEUE_WAIT_S=60      # median of the emulated queue wait
QUEUE_WAIT_SIGMA=0.5
SEED=20261207        # the fault schedule's and the queue waits'
MTBF_PRIOR_H=0.1     # every controller's --node-mtbf-prior-hours (README.md says why)
QUARANTINE_S=300
NODES_PER_CLUSTER=8
VARIANTS="on off plain"
TAG=""
OUT_DIR=$REPO/bench/results
KEEP=1
COMMAND_LINE="bench/goodput-e2e/run.sh${*:+ $*}"
PORT_BASES=(18200 18300 18400)
MASTER_PORT_BASES=(22500 23500 24500)

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; cat <<EOF

Options (defaults in brackets):
  --work-s S            seconds of work [$WORK_S] (steps of --step-s [$STEP_S])
  --time-limit-min M    the Slurm time limit [$TIME_LIMIT_MIN]
  --fault-every-s S     mean running time between faults [$FAULT_EVERY_S]
  --queue-wait-s S      median queue wait of every job [$QUEUE_WAIT_S] (--queue-wait-sigma [$QUEUE_WAIT_SIGMA])
  --seed N              fault schedule and queue waits [$SEED]
  --ckpt-cost-s S       seconds a checkpoint costs [$CKPT_COST_S]
  --fixed-every-s S     off and plain: checkpoint every S s of steps [$FIXED_EVERY_S]
  --mtbf-prior-hours H  the controllers' --node-mtbf-prior-hours [$MTBF_PRIOR_H]
  --variants "on off plain"   which to run
  --tag T               results named goodput-e2e-DATE-T
  --out-dir D           where the results go [bench/results]
  --clean               remove the work directory at the end (kept by default)
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --work-s) WORK_S=$2; shift 2 ;;
    --step-s) STEP_S=$2; shift 2 ;;
    --time-limit-min) TIME_LIMIT_MIN=$2; shift 2 ;;
    --fault-every-s) FAULT_EVERY_S=$2; shift 2 ;;
    --queue-wait-s) QUEUE_WAIT_S=$2; shift 2 ;;
    --queue-wait-sigma) QUEUE_WAIT_SIGMA=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --ckpt-cost-s) CKPT_COST_S=$2; shift 2 ;;
    --fixed-every-s) FIXED_EVERY_S=$2; shift 2 ;;
    --mtbf-prior-hours) MTBF_PRIOR_H=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --out-dir) OUT_DIR=$2; shift 2 ;;
    --clean) KEEP=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

log() { echo "[$(date +%H:%M:%S)] $*"; }
die() { echo "run.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (the local Slurm cluster does)"
for b in trellis trellis-controller trellis-worker; do
  [ -x "$TRELLIS_BIN/$b" ] || die "no $TRELLIS_BIN/$b (build first, or set TRELLIS_BIN)"
done
command -v python3 >/dev/null || die "needs python3"
command -v sqlite3 >/dev/null || die "needs sqlite3"
STEPS=$(python3 -c "print(round($WORK_S / $STEP_S))")
FIXED_EVERY=$(python3 -c "print(max(1, round($FIXED_EVERY_S / $STEP_S)))")

WORK=$(mktemp -d /tmp/goodput-e2e.XXXXXX)
chmod 0755 "$WORK"
log "work directory $WORK"
declare -A CTL_PID=() INJ_PID=() RUN_ID=() ADDR=()
CLUSTERS=()

cleanup() {
  local v p
  for v in "${!INJ_PID[@]}"; do kill "${INJ_PID[$v]}" 2>/dev/null || true; done
  for v in "${!CTL_PID[@]}"; do
    p=${CTL_PID[$v]}
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  for c in "${CLUSTERS[@]}"; do "$CLUSTER" down "$c" >/dev/null 2>&1 || echo "run.sh: down $c failed" >&2; done
  if [ "$KEEP" = 0 ]; then rm -rf "$WORK"; else echo "kept $WORK (controller logs, run directories, faults)"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The fault schedule: one for every variant.
python3 - "$WORK/schedule.json" "$SEED" "$FAULT_EVERY_S" "$WORK_S" <<'PY'
import json, random, sys
out, seed, every, work = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
kinds = ["rank_kill", "worker_kill", "hang"]
faults, t = [], 0.0
while t < 4 * work:  # more than any variant runs
    t += rng.uniform(every * 5 / 6, every * 7 / 6)
    faults.append({"at_running_s": round(t, 1), "kind": kinds[len(faults) % 3],
                   "rank": rng.randrange(4)})
json.dump({"seed": seed, "every_s": every, "faults": faults}, open(out, "w"), indent=1)
PY

# write_spec VARIANT POOL(0/1) -> path
write_spec() {
  local v=$1 pool=$2 spec=$WORK/$1/spec.toml spares relaunch cont every
  case "$v" in
    on) spares=1 relaunch=true cont=ahead every=auto ;;
    off) spares=1 relaunch=true cont=after every=$FIXED_EVERY ;;
    plain) spares=0 relaunch=false cont=after every=$FIXED_EVERY ;;
  esac
  cat >"$spec" <<EOF
# goodput-e2e, variant "$v" (bench/goodput-e2e/README.md)
[job]
name = "goodput-$v"
command = "exec python3 $HERE/rank.py"

[slurm]
nodes = 2
ranks_per_node = 2
spare_nodes = $spares
time_limit = $TIME_LIMIT_MIN
signal_grace_s = $GRACE_S

[restart]
max_restarts = 200
backoff_s = 0
hang_timeout_s = $HANG_TIMEOUT_S
relaunch_in_allocation = $relaunch
continuation = "$cont"
EOF
  [ "$pool" = 1 ] && echo "spare_pool_nodes = 1" >>"$spec"
  cat >>"$spec" <<EOF

[env]
STEPS = "$STEPS"
STEP_S = "$STEP_S"
CKPT_COST_S = "$CKPT_COST_S"
CKPT_EVERY = "$every"
EOF
  echo "$spec"
}

start_variant() {  # INDEX VARIANT
  local i=$1 v=$2 c=$WORK/c-$2 d=$WORK/$2
  mkdir -p "$d"
  mkdir -m 0700 "$d/auth"  # the controller's token (unused: the CLI talks over its socket)
  CLUSTERS+=("$c")
  "$CLUSTER" up "$c" --nodes "$NODES_PER_CLUSTER" --cpus 4 --port-base "${PORT_BASES[$i]}" \
    --queue-wait "$QUEUE_WAIT_S" --queue-wait-sigma "$QUEUE_WAIT_SIGMA" \
    --queue-wait-seed "$SEED" >"$d/cluster-up.log" 2>&1 || { cat "$d/cluster-up.log" >&2; die "cluster $c did not come up"; }
  (
    # shellcheck disable=SC1091
    . "$c/env"
    exec "$TRELLIS_BIN/trellis-controller" --listen 127.0.0.1:0 --socket "$d/ctl/controller.sock" \
      --token-file "$d/auth/token" --port-file "$d/port" --metrics-listen 127.0.0.1:0 \
      --db "$d/controller.db" --output-root "$d/runs" --data-root "$d" \
      --master-port-base "${MASTER_PORT_BASES[$i]}" --quarantine-s "$QUARANTINE_S" \
      --probation-s 0 --node-mtbf-prior-hours "$MTBF_PRIOR_H" >>"$d/controller.log" 2>&1
  ) &
  CTL_PID[$v]=$!
  ADDR[$v]=unix:$d/ctl/controller.sock
  local deadline=$((SECONDS + 30))
  until [ -s "$d/port" ]; do
    kill -0 "${CTL_PID[$v]}" 2>/dev/null || { tail "$d/controller.log" >&2; die "controller $v exited"; }
    [ $SECONDS -lt $deadline ] || die "controller $v did not start"
    sleep 0.2
  done
  log "$v: cluster $c (ports ${PORT_BASES[$i]}+), controller pid ${CTL_PID[$v]}"
}

tr_() { local v=$1; shift; "$TRELLIS_BIN/trellis" --addr "${ADDR[$v]}" "$@"; }

i=0
for v in $VARIANTS; do
  case "$v" in on|off|plain) ;; *) die "unknown variant $v (on, off, plain)" ;; esac
  start_variant "$i" "$v"
  i=$((i + 1))
done

# The spare pool: in the "on" spec where this build's controller knows it.
POOL=0
POOL_NOTE="not asked"
if [[ " $VARIANTS " == *" on "* ]]; then
  spec=$(write_spec on 1)
  if err=$(tr_ on submit "$spec" --dry-run 2>&1 >/dev/null); then
    POOL=1 POOL_NOTE="restart.spare_pool_nodes = 1"
  elif grep -q "spare_pool_nodes" <<<"$err"; then
    POOL_NOTE="left out: this build's controller refuses restart.spare_pool_nodes ($(head -1 <<<"$err"))"
    log "on: $POOL_NOTE"
  else
    die "the on spec is refused: $err"
  fi
fi

for v in $VARIANTS; do
  p=0
  [ "$v" = on ] && p=$POOL
  spec=$(write_spec "$v" "$p")
  RUN_ID[$v]=$(tr_ "$v" submit "$spec") || die "submit of $v failed"
  log "$v: submitted ${RUN_ID[$v]}"
done
for v in $VARIANTS; do
  : >"$WORK/$v/faults.jsonl"
  python3 "$HERE/inject.py" --db "$WORK/$v/controller.db" --run "${RUN_ID[$v]}" \
    --work-dir "$WORK/$v" --rank-script "$HERE/rank.py" --schedule "$WORK/schedule.json" \
    --log "$WORK/$v/faults.jsonl" >>"$WORK/$v/inject.log" 2>&1 &
  INJ_PID[$v]=$!
done

# Until every run ends (or 4 x the work plus 10 minutes: then it is cancelled).
deadline=$((SECONDS + 4 * ${WORK_S%.*} + 600))
t0=$SECONDS
while :; do
  line="" all_done=1
  for v in $VARIANTS; do
    st=$(sqlite3 -cmd ".timeout 5000" "$WORK/$v/controller.db" \
      "SELECT state FROM runs WHERE run_id='${RUN_ID[$v]}'" 2>/dev/null || echo '?')
    step=$(sqlite3 -cmd ".timeout 5000" "$WORK/$v/controller.db" \
      "SELECT step FROM steps WHERE run_id='${RUN_ID[$v]}' ORDER BY attempt DESC, launch DESC, \
       step DESC LIMIT 1" 2>/dev/null || echo '?')
    nf=$(wc -l <"$WORK/$v/faults.jsonl" 2>/dev/null || echo 0)
    line+="  $v: $st step ${step:-0}/$STEPS faults $nf"
    case "$st" in SUCCEEDED|FAILED|CANCELLED) ;; *) all_done=0 ;; esac
  done
  log "$((SECONDS - t0)) s:$line"
  [ $all_done = 1 ] && break
  if [ $SECONDS -ge $deadline ]; then
    log "deadline passed: cancelling what still runs"
    for v in $VARIANTS; do tr_ "$v" cancel "${RUN_ID[$v]}" >/dev/null 2>&1 || true; done
    sleep 5
    break
  fi
  sleep 30
done
for v in $VARIANTS; do
  kill "${INJ_PID[$v]}" 2>/dev/null || true
  wait "${INJ_PID[$v]}" 2>/dev/null || true
  unset "INJ_PID[$v]"
  tr_ "$v" show "${RUN_ID[$v]}" --json >"$WORK/$v/show.json"
  tr_ "$v" show "${RUN_ID[$v]}" >"$WORK/$v/show.txt"
  cp "$WORK/c-$v/log/queue-wait.log" "$WORK/$v/queue-wait.log" 2>/dev/null || true
done

date_s=$(date +%Y-%m-%d)
name=goodput-e2e-$date_s${TAG:+-$TAG}
mkdir -p "$OUT_DIR"
python3 "$HERE/report.py" --work "$WORK" --variants "$VARIANTS" --out "$OUT_DIR/$name" \
  --command "$COMMAND_LINE" --pool-note "$POOL_NOTE" --bin "$TRELLIS_BIN" \
  --config "$(printf '{"work_s": %s, "steps": %s, "step_s": %s, "ckpt_cost_s": %s, "fixed_every_steps": %s, "time_limit_min": %s, "signal_grace_s": %s, "hang_timeout_s": %s, "fault_every_s": %s, "queue_wait_median_s": %s, "queue_wait_sigma": %s, "seed": %s, "node_mtbf_prior_hours": %s, "quarantine_s": %s, "nodes_per_cluster": %s}' \
    "$WORK_S" "$STEPS" "$STEP_S" "$CKPT_COST_S" "$FIXED_EVERY" "$TIME_LIMIT_MIN" "$GRACE_S" \
    "$HANG_TIMEOUT_S" "$FAULT_EVERY_S" "$QUEUE_WAIT_S" "$QUEUE_WAIT_SIGMA" "$SEED" "$MTBF_PRIOR_H" \
    "$QUARANTINE_S" "$NODES_PER_CLUSTER")"
log "wrote $OUT_DIR/$name.md and .json"
