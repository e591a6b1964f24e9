#!/usr/bin/env bash
# The production path on GPUs, one command on a GPU machine (root, CUDA,
# PyTorch's LibTorch, no network): builds controller, worker, CLI and trainer
# against the CUDA LibTorch, starts a local Slurm cluster with one node per GPU
# (each node's tasks see their own GPU) and the controller, and runs moe-bench
# on NGPU nodes x 1 GPU through them, watched with the CLI:
#
#   alone, alone2 trellis-train, one process per GPU, no controller (the baseline,
#                 before and after the others)
#   ctas16        through the controller (the worker's default NCCL_MAX_CTAS=16)
#   ctas_default  through the controller, NCCL's own CTA count ([env] NCCL_MAX_CTAS = "")
#   kill          through the controller, a rank crashed (SIGSEGV) after the step-10
#                 checkpoint: the run restarts and resumes from it (a crash blames no
#                 node; a SIGKILL would, and quarantine a one-node cluster's only node)
#
# With SHARE_ONE_GPU=1 all NGPU nodes (and the alone runs' ranks) share GPU 0,
# each a NCCL host of its own over loopback sockets (local-cluster --share-gpus):
# the two-node path, NCCL included, on a machine with one GPU; its speed is not
# that of NGPU GPUs.
#
# It writes OUT_DIR/gpu-e2e-<date>.{md,json} (gpu-e2e-<N>gpu-<date> for N != 2,
# gpu-e2e-<N>nodes-1gpu-<date> with SHARE_ONE_GPU=1; bench/gpu/e2e_summary.py) and
# the logs under WORK. Needs .third_party from deploy/gpu/stage-prefix.sh
# (carry it); see bench/gpu/README.md.
#
#   bench/gpu/e2e.sh [NGPU]        (default: 2)
#   env: OUT_DIR (default bench/results), WORK (default a temp dir),
#        BUILD_DIR (default build-gpu-e2e), STEPS (default 60), WARMUP (10),
#        LAYERS (every run's layers, default the spec's), SHARE_ONE_GPU=1 (above),
#        KILL_STEPS (the kill run's steps, default 15), KILL_LAYERS (its layers, default 2),
#        RUN_TIMEOUT_S (a controller run not ended by then is cancelled; default 300),
#        RUNS (default "alone ctas16 ctas_default kill alone2"),
#        BASE_SPEC (default examples/moe-bench.toml), SKIP_BUILD=1 (use BUILD_DIR
#        as it is: for a rehearsal of the script on a CPU machine),
#        PREFIX (where the staged packages are unpacked, default .third_party/prefix;
#        set but empty: the machine's own Slurm, munge and gRPC, nothing unpacked),
#        CLUSTER_DIR (default /tmp/trellis-gpu-cluster), PORT_BASE (the cluster's
#        ports, default 17500), CONTROLLER_PORT (default 50161; 0: any free port; the
#        controller's /metrics takes any free port)
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
NGPU=${1:-2}
STEPS=${STEPS:-60}
KILL_STEPS=${KILL_STEPS:-15}
KILL_LAYERS=${KILL_LAYERS:-2}
LAYERS=${LAYERS:-}
SHARE=${SHARE_ONE_GPU:-0}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-300}
WARMUP=${WARMUP:-10}
# The baseline runs before and after the controller runs (their mean is the
# reference), so that a drift of the machine does not pass for a cost.
RUNS=${RUNS:-alone ctas16 ctas_default kill alone2}
BASE_SPEC=${BASE_SPEC:-examples/moe-bench.toml}
OUT_DIR=${OUT_DIR:-bench/results}
WORK=${WORK:-$(mktemp -d /tmp/trellis-e2e.XXXXXX)}
BUILD_DIR=${BUILD_DIR:-build-gpu-e2e}
PREFIX=${PREFIX-$REPO/.third_party/prefix}
CLUSTER=${CLUSTER_DIR:-/tmp/trellis-gpu-cluster}
PORT_BASE=${PORT_BASE:-17500}
CONTROLLER_PORT=${CONTROLLER_PORT:-50161}
# shellcheck source=bench/gpu/e2e_controller.sh
. "$REPO/bench/gpu/e2e_controller.sh"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
die() { echo "e2e.sh: $*" >&2; exit 1; }
mkdir -p "$OUT_DIR" "$WORK"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
[[ "$NGPU" =~ ^[1-9][0-9]*$ ]] || die "NGPU must be a positive integer, got '$NGPU'"
[[ "$SHARE" =~ ^[01]$ ]] || die "SHARE_ONE_GPU must be 0 or 1, got '$SHARE'"
[[ -z "$LAYERS" || "$LAYERS" =~ ^[1-9][0-9]*$ ]] || die "LAYERS must be a positive integer, got '$LAYERS'"
have=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$SHARE" = 1 ]; then
  [ "$have" -ge 1 ] || die "SHARE_ONE_GPU=1 needs a GPU, nvidia-smi lists none"
else
  [ "$have" -ge "$NGPU" ] ||
    die "needs $NGPU GPUs, nvidia-smi lists $have (SHARE_ONE_GPU=1 puts all $NGPU nodes on GPU 0)"
fi

# ------------------------------------------------------------------ build --
if [ -n "$PREFIX" ]; then
  log "unpack the staged packages into $PREFIX"
  bash deploy/gpu/unpack-prefix.sh "$PREFIX" || die "unpack-prefix.sh failed"
  # shellcheck disable=SC1091
  . "$PREFIX/env"
else
  log "PREFIX empty: the machine's own Slurm, munge and gRPC"
fi
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  log "not building: SKIP_BUILD=1, using $BUILD_DIR"
else
log "build ($BUILD_DIR)"
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || die "no torch"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_UNITY_BUILD=OFF -DTRELLIS_WITH_CUDA=ON \
  -DTRELLIS_THIRD_PARTY_INCLUDE="$REPO/.third_party/include" \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$PREFIX/usr" >"$WORK/cmake.log" 2>&1 ||
  { tail -40 "$WORK/cmake.log"; die "cmake failed ($WORK/cmake.log)"; }
t0=$SECONDS
ninja -C "$BUILD_DIR" -j "$(nproc)" trellis trellis-controller trellis-worker trellis-rank trellis-train \
  trellis-corpus >"$WORK/build.log" 2>&1 ||
  { grep -E "error|Error" -A5 "$WORK/build.log" | head -80; die "build failed ($WORK/build.log)"; }
log "built in $((SECONDS - t0)) s"
fi
case "$BUILD_DIR" in /*) BIN=$BUILD_DIR/bin;; *) BIN=$REPO/$BUILD_DIR/bin;; esac
export PATH=$BIN:$PATH

# --------------------------------------------------------------- the host --
{
  echo "date: $(date -u +%FT%TZ)"
  echo "gpus: $(nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader | tr '\n' ';')"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())')"
  echo "cpus: $(nproc)"
  grep -E '^(MemTotal|MemFree|MemAvailable):' /proc/meminfo | sed 's/^/proc_meminfo /'
  for d in /sys/devices/system/node/node[0-9]*; do
    echo "$(basename "$d") cpulist=$(cat "$d/cpulist") $(grep -E 'MemTotal|MemFree' "$d/meminfo" | awk '{printf "%s%s kB ", $3, $4}')"
  done
} >"$WORK/host.txt"
cat "$WORK/host.txt"

log "corpus"
vocab=$(sed -n 's/^vocab = \([0-9]*\).*/\1/p' "$BASE_SPEC")
"$BIN/trellis-corpus" synthetic "$WORK/data.corpus" "$vocab" 4000000 >/dev/null || die "trellis-corpus failed"

# spec NAME [env lines...] -> path: moe-bench on NGPU nodes x 1 GPU.
spec() {
  local name=$1 path="$WORK/$1.toml"; shift
  local steps=$STEPS layers=$LAYERS
  # The kill run: moe-bench with KILL_LAYERS layers (its checkpoint, written
  # and read back, is then a quarter of the full model's ~30 GB).
  [ "$name" = kill ] && steps=$KILL_STEPS layers=$KILL_LAYERS
  sed -e "s/^name = .*/name = \"e2e-${name//_/-}\"/" -e "s/^nodes = .*/nodes = $NGPU/" \
      -e "s/^global_batch = .*/global_batch = $((2 * NGPU))/" -e "s/^steps = .*/steps = $steps/" \
      -e "s|^data = .*|data = \"$WORK/data.corpus\"|" -e "/^\[checkpoint\]/,/^keep/d" \
      -e "${layers:+s/^layers = .*/layers = $layers/}" \
      "$BASE_SPEC" >"$path"
  grep -q '^gpus_per_node' "$path" || sed -i 's/^\[slurm\]$/[slurm]\ngpus_per_node = 1/' "$path"
  cat >>"$path" <<EOF

[checkpoint]
# Only the kill run saves (moe-bench's state is tens of GB), at step 10.
every_steps = $([ "$name" = kill ] && echo 10 || echo 0)
keep = 1
at_end = false

[restart]
max_restarts = 2
backoff_s = 1

[gate]
timeout_s = 120
# This host's NUMA node reports what the kernel accounts to it (see the
# results' host section); the GH200 default (100 GiB per socket) is for GH200.
min_free_gib_per_socket = 1.0

[env]
# NVLink multicast stays off: a program using it can take a shared host's GPUs down.
NCCL_NVLS_ENABLE = "0"
TORCH_SYMM_MEM_DISABLE_MULTICAST = "1"
EOF
  local line
  for line in "$@"; do echo "$line" >>"$path"; done
  echo "$path"
}

# ----------------------------------------------------------------- alone --
# One trellis-train per GPU, ranks bound as the worker binds them
# (CUDA_VISIBLE_DEVICES per rank), NCCL_MAX_CTAS=16 as the worker sets it.
# Shared: every rank on GPU 0 with the NCCL settings the shared cluster's
# nodes get (a host id each, loopback sockets).
run_alone() {
  local name=$1 path port=$((29500 + RANDOM % 2000)) r pids=() rc=0 share_env dev
  path=$(spec alone)
  mkdir -p "$WORK/$name"
  for ((r = 0; r < NGPU; r++)); do
    share_env=() dev=$r
    [ "$SHARE" = 1 ] && dev=0 &&
      share_env=(NCCL_HOSTID="trellis-alone-rank$r" NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1)
    env "${share_env[@]}" CUDA_VISIBLE_DEVICES=$dev NCCL_MAX_CTAS=16 OMP_NUM_THREADS=1 \
      NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
      RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$BIN/trellis-train" "$path" --data "$WORK/data.corpus" --json \
      >"$WORK/$name/rank$r.jsonl" 2>"$WORK/$name/rank$r.err" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  [ $rc = 0 ] || { tail -n 5 "$WORK/$name"/rank*.err; echo "$name: a rank failed"; }
  return $rc
}

# ----------------------------------------------------- cluster, controller --
start_cluster_and_controller() {
  log "local Slurm cluster: $NGPU nodes x 1 GPU$([ "$SHARE" = 1 ] && echo " (shared)"), host sysfs ($CLUSTER)"
  deploy/slurm/local-cluster down "$CLUSTER" >/dev/null 2>&1 || true
  deploy/slurm/local-cluster up "$CLUSTER" --nodes "$NGPU" --gpus-per-node 1 --host-sysfs \
    $([ "$SHARE" = 1 ] && echo --share-gpus) \
    ${PREFIX:+--prefix "$PREFIX"} --port-base "$PORT_BASE" >"$WORK/cluster-up.log" 2>&1 ||
    { cat "$WORK/cluster-up.log"; die "the local cluster did not start"; }
  tail -n 2 "$WORK/cluster-up.log"
  # shellcheck disable=SC1091
  . "$CLUSTER/env"
  sinfo -N -o '%N %G %T' | tee "$WORK/sinfo.txt"
  cp "$CLUSTER/etc/gres.conf" "$WORK/gres.conf"
  start_e2e_controller "$BIN" "$WORK" "$CONTROLLER_PORT" || die "controller did not start"
  log "controller on $TRELLIS_ADDR, /metrics on port $(cat "$WORK/controller.metrics-port")"
}

stop_all() {
  [ -n "${CONTROLLER_PID:-}" ] && kill "$CONTROLLER_PID" 2>/dev/null
  deploy/slurm/local-cluster down "$CLUSTER" >/dev/null 2>&1 || true
}
trap stop_all EXIT

# ----------------------------------------------------- through the controller --
# run_controller NAME [env lines]: submit, watch to the end, save what the
# controller and the CLI show. The kill run crashes a rank (SIGSEGV) after step 10's checkpoint.
run_controller() {
  local name=$1 path id run_dir rc=0; shift
  path=$(spec "$name" "$@")
  mkdir -p "$WORK/$name"
  date +%s.%N >"$WORK/$name/submitted_at"
  id=$(trellis submit "$path") || { echo "$name: submit failed"; return 1; }
  echo "$id" >"$WORK/$name/run_id"
  log "$name: run $id"
  trellis watch --json "$id" >"$WORK/$name/watch.jsonl" 2>&1 &
  local json_watch=$!
  if [ "$name" = kill ]; then
    run_dir=$(trellis show --json "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_dir"])')
    local deadline=$((SECONDS + 300)) victim=
    until [ -f "$run_dir/checkpoints/step-00000010/manifest.json" ]; do
      [ $SECONDS -lt $deadline ] || { echo "kill: no step-10 checkpoint in 300 s"; break; }
      sleep 0.2
    done
    victim=$(pgrep -f "trellis-rank --run-dir $run_dir" | head -1)
    if [ -n "$victim" ]; then
      local cmdline
      cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$victim/cmdline")  # gone once it is killed
      kill -SEGV "$victim"
      echo "$(date +%s.%N) $victim $cmdline" >"$WORK/$name/killed"
      log "kill: SIGSEGV to rank process $victim after the step-10 checkpoint"
    fi
  fi
  # The text view a user watches (its exit status is the run's outcome). A run
  # that has not ended after RUN_TIMEOUT_S is cancelled, so that one stuck run
  # does not use up the machine's time.
  timeout "$RUN_TIMEOUT_S" "$BIN/trellis" watch "$id" >"$WORK/$name/watch.txt" 2>&1 || rc=$?
  if [ "$rc" = 124 ]; then
    echo "$name: not ended after $RUN_TIMEOUT_S s: cancelling $id"
    trellis cancel "$id" >/dev/null 2>&1
    sleep 2
  fi
  kill "$json_watch" 2>/dev/null
  wait "$json_watch"
  trellis show "$id" >"$WORK/$name/show.txt" 2>&1
  trellis show --json "$id" >"$WORK/$name/show.json" 2>&1
  trellis gate-report "$id" >"$WORK/$name/gate.txt" 2>&1
  trellis gate-report --json "$id" >"$WORK/$name/gate.json" 2>&1
  run_dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_dir"])' "$WORK/$name/show.json")
  cp -r "$run_dir"/attempt-* "$WORK/$name/" 2>/dev/null
  cp "$run_dir"/checkpoints/nccl-rank*.log "$WORK/$name/" 2>/dev/null
  rm -rf "$run_dir/checkpoints"  # tens of GB each
  tail -n 3 "$WORK/$name/watch.txt"
  return $rc
}

status=0
for r in $RUNS; do
  if [[ "$r" == alone* ]]; then
    log "$r: trellis-train x $NGPU"
    run_alone "$r" || status=1
    continue
  fi
  [ -n "${CONTROLLER_PID:-}" ] || start_cluster_and_controller
  case "$r" in
    ctas16|kill) run_controller "$r" || status=1;;
    ctas_default) run_controller "$r" 'NCCL_MAX_CTAS = ""' || status=1;;
    *) die "unknown run '$r' (alone[N] ctas16 ctas_default kill)";;
  esac
done

log "summary"
# gpu-e2e-<date> for the 2-GPU run the results cite, gpu-e2e-<N>gpu-<date> otherwise,
# gpu-e2e-<N>nodes-1gpu-<date> when the nodes share one GPU.
if [ "$SHARE" = 1 ]; then
  name=gpu-e2e-${NGPU}nodes-1gpu-$(date -u +%Y-%m-%d) gpus=1
else
  name=gpu-e2e-$([ "$NGPU" = 2 ] || echo "${NGPU}gpu-")$(date -u +%Y-%m-%d) gpus=$NGPU
fi
settings="STEPS=$STEPS WARMUP=$WARMUP${LAYERS:+ LAYERS=$LAYERS}$([ "$SHARE" = 1 ] && echo " SHARE_ONE_GPU=1")"
python3 bench/gpu/e2e_summary.py "$WORK" "$OUT_DIR/$name" \
  "bench/gpu/e2e.sh $NGPU ($settings)" "$NGPU" "$WARMUP" "$RUNS" "$gpus" || status=1
exit $status
