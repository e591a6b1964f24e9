#!/usr/bin/env bash
# The multi-GPU validation, one command on a host with 2, 4 or 8 GPUs. Builds
# trainer_core (TRELLIS_TRAINER_ONLY, kernels/ linked), then trains moe-bench
# STEPS steps per variant, every rank a trellis-train process (RANK,
# WORLD_SIZE, LOCAL_RANK = its GPU, MASTER_ADDR/PORT), at the spec's rows per
# GPU (moe-bench: 2; ROWS_PER_GPU another, MICRO_BATCH rows per forward):
#   one_gpu       world 1 (the scaling baseline)
#   base          world NGPU as 2 nodes of NGPU/2 (node_size in the spec),
#                 NCCL_MAX_CTAS=16, fp32 expert gather, bf16 all-to-all
#                 gradient reduction
#   one_node      base as 1 node of NGPU (expert parallel over every GPU, no
#                 expert gather)
#   one_node_groups one_node with model.expert_groups = NGPU: every EP rank
#                 gets the same token-expert pairs (its EP load is exactly 1),
#                 so one_node's gap to it is what routing imbalance costs
#                 there (moe-bench's deep layers route most tokens to the same
#                 experts early in training: bench/results/routing-depth-2026-12-03.md)
#   ctas_default  base with NCCL's own CTA count (NCCL_MAX_CTAS unset)
#   gather_fp8    base with parallel.expert_gather_dtype = "fp8"
#   gather_bf16   base with parallel.expert_gather_dtype = "bfloat16"
#   grad_fp32     base with parallel.grad_reduce_dtype = "float32"
#   visible_one   base with each rank seeing only its GPU (CUDA_VISIBLE_DEVICES,
#                 as the workers start ranks) instead of LOCAL_RANK
#   prefetch_off  base with parallel.prefetch_layers = 0: no gather ahead, every
#                 collective waited for at once (the overlap's comparison)
# Every other variant runs with parallel.prefetch_layers = PREFETCH_LAYERS
# (default 1, the trainer's default; PREFETCH_LAYERS=0 runs them all without
# overlap). The table gives each variant's collective time and the part the
# compute stood waiting for (comm_seconds, exposed_comm_seconds of the step
# records), and the comparison the overlap's aim: base's tokens/s per GPU vs
# one_gpu (>= 0.95) with exposed communication under 5% of the step.
# NCCL's log goes to WORK/<variant>.rank<r>.nccl (NCCL_DEBUG_FILE): its
# channel count per communicator is the CTAs (SMs) each collective holds. A
# failing variant prints each rank's last lines. Prints one table; writes
# OUT_DIR/multi-gpu-<NGPU>gpu-<date>.{md,json}.
#
# The GPU machine needs toml++, nlohmann-json and CLI11 headers: make them with
# deploy/gpu/stage-headers.sh and carry .third_party (bench/gpu/README.md).
#
# Usage: bench/gpu/multi_gpu.sh [NGPU]   (env: STEPS=20 WARMUP=5
#        VARIANTS="one_gpu base one_node one_node_groups ctas_default gather_fp8 gather_bf16
#        grad_fp32 visible_one prefetch_off" PREFETCH_LAYERS=1 ROWS_PER_GPU=<spec's>
#        MICRO_BATCH=<none: all rows in one forward>
#        BUILD_DIR=build-gpu OUT_DIR=bench/results WORK=<temp dir> TRELLIS_COMM_TIMEOUT_S=300
#        LAYERS=<the spec's>: every variant's model.layers
#        SHARE_ONE_GPU=1: every rank on GPU 0, each a NCCL host of its own over
#        loopback sockets (as bench/gpu/e2e.sh shares one): the script's GPU path
#        rehearsed on a one-GPU machine, with LAYERS small enough for NGPU ranks
#        to fit; its speed says nothing of NGPU GPUs; writes multi-gpu-<NGPU>ranks-1gpu-...
#        DEVICE=cpu: the same launcher on CPU (gloo, examples/tiny-moe.toml) to check it)
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${DEVICE:-cuda}
SHARE=${SHARE_ONE_GPU:-0}
LAYERS=${LAYERS:-}
if [ "$DEVICE" = cuda ] && [ "$SHARE" != 1 ]; then
  NGPU=${1:-$(nvidia-smi -L | wc -l)}
elif [ "$DEVICE" = cuda ]; then
  NGPU=${1:-2}
else
  NGPU=${1:-4}
fi
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
ALL_VARIANTS="one_gpu base one_node one_node_groups ctas_default gather_fp8 gather_bf16 grad_fp32 visible_one"
VARIANTS=${VARIANTS:-$ALL_VARIANTS prefetch_off}
PREFETCH_LAYERS=${PREFETCH_LAYERS:-1}
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT_DIR=${OUT_DIR:-bench/results}
WORK=${WORK:-$(mktemp -d)}
THIRD_PARTY_INCLUDE=${THIRD_PARTY_INCLUDE:-$PWD/.third_party/include}
# NVLink multicast stays off: a program using it can take a shared host's GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
log() { echo "== $(date -u +%H:%M:%S) $*"; }
die() { echo "multi_gpu.sh: $*" >&2; exit 1; }
[ "$NGPU" -ge 2 ] && [ $((NGPU % 2)) = 0 ] || die "needs an even number of GPUs >= 2, got $NGPU"
[[ "$SHARE" =~ ^[01]$ ]] || die "SHARE_ONE_GPU must be 0 or 1, got '$SHARE'"
[[ -z "$LAYERS" || "$LAYERS" =~ ^[1-9][0-9]*$ ]] || die "LAYERS must be a positive integer, got '$LAYERS'"
[ -f "$THIRD_PARTY_INCLUDE/toml++/toml.h" ] || [ -f /usr/include/toml++/toml.h ] ||
  die "no toml++ headers: run deploy/gpu/stage-headers.sh on a Debian machine and carry .third_party"
NODE_SIZE=$((NGPU / 2))
mkdir -p "$OUT_DIR" "$WORK"

if [ "$DEVICE" = cuda ]; then
  log "build ($BUILD_DIR)"
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || die "no torch"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_UNITY_BUILD=OFF -DTRELLIS_TRAINER_ONLY=ON \
    -DTRELLIS_WITH_CUDA=ON -DTRELLIS_THIRD_PARTY_INCLUDE="$THIRD_PARTY_INCLUDE" \
    -DCMAKE_PREFIX_PATH="$prefix" > "$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log"; die cmake; }
  ninja -C "$BUILD_DIR" trellis-train trellis-corpus > "$WORK/build.log" 2>&1 \
    || { grep -E "error" -A5 "$WORK/build.log" | head -60; die build; }
  BASE_SPEC=examples/moe-bench.toml
  "$BUILD_DIR/bin/trellis-corpus" synthetic "$WORK/data.corpus" 32000 4000000 > /dev/null || die corpus
else
  BASE_SPEC=examples/tiny-moe.toml
  "$BUILD_DIR/bin/trellis-corpus" build "$WORK/data.corpus" /usr/share/common-licenses > /dev/null \
    || die "corpus (build $BUILD_DIR first)"
fi
BIN=$BUILD_DIR/bin
SPEC_ROWS=$(sed -n 's/^global_batch = \([0-9]*\).*/\1/p' "$BASE_SPEC")
ROWS_PER_GPU=${ROWS_PER_GPU:-$SPEC_ROWS}
MICRO_BATCH=${MICRO_BATCH:-}
[[ "$ROWS_PER_GPU" =~ ^[1-9][0-9]*$ ]] || die "ROWS_PER_GPU must be a positive integer, got '$ROWS_PER_GPU'"
if [ -n "$MICRO_BATCH" ]; then
  [[ "$MICRO_BATCH" =~ ^[1-9][0-9]*$ ]] && [ $((ROWS_PER_GPU % MICRO_BATCH)) = 0 ] ||
    die "MICRO_BATCH must divide ROWS_PER_GPU=$ROWS_PER_GPU, got '$MICRO_BATCH'"
fi
# Another size than the spec's: its own result files.
SIZE_TAG=""
[ "$ROWS_PER_GPU" != "$SPEC_ROWS" ] || [ -n "$MICRO_BATCH" ] &&
  SIZE_TAG="-${ROWS_PER_GPU}rows${MICRO_BATCH:+-micro$MICRO_BATCH}"

# spec VARIANT WORLD -> path: the base spec with the variant's [parallel] and batch.
spec() {
  local path="$WORK/$1.toml" node=$NODE_SIZE gather=float32 grad=bfloat16 ahead=$PREFETCH_LAYERS
  local groups=1
  [ "$2" = 1 ] && node=1
  [ "$1" = one_node ] && node=$2
  [ "$1" = one_node_groups ] && node=$2 && groups=$2
  [ "$1" = gather_fp8 ] && gather=fp8
  [ "$1" = gather_bf16 ] && gather=bfloat16
  [ "$1" = grad_fp32 ] && grad=float32
  [ "$1" = prefetch_off ] && ahead=0
  # The variant's [parallel] lines (\n: newlines for sed and printf %b).
  local block="node_size = $node\nep = $node\ngrad_reduce_dtype = \"$grad\""
  block="$block\nexpert_gather_dtype = \"$gather\"\nprefetch_layers = $ahead"
  sed -e "s/^global_batch = .*/global_batch = $((ROWS_PER_GPU * $2))/" \
      -e "s/^steps = .*/steps = $STEPS/" -e "/^device = /d" -e "/^node_size = \|^ep = /d" \
      -e "/^grad_reduce_dtype = \|^expert_gather_dtype = \|^prefetch_layers = /d" \
      -e "/^expert_groups = /d" -e "s/^experts_per_token = .*/&\nexpert_groups = $groups/" \
      -e "s/^\[parallel\]$/[parallel]\n$block/" "$BASE_SPEC" > "$path"
  grep -q '^\[parallel\]' "$path" || printf '[parallel]\n%b\n' "$block" >> "$path"
  sed -i "s/^\[training\]$/[training]\ndevice = \"$DEVICE\"/" "$path"
  [ -n "$LAYERS" ] && sed -i "s/^layers = .*/layers = $LAYERS/" "$path"
  sed -i "/^micro_batch = /d" "$path"
  [ -n "$MICRO_BATCH" ] && sed -i "s/^\[training\]$/[training]\nmicro_batch = $MICRO_BATCH/" "$path"
  echo "$path"
}

# A port free at this moment, from the kernel: a random one could be another
# program's server, which rank 1 would then wait on until the timeout.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# launch VARIANT WORLD: one trellis-train per rank; rank r on GPU r.
launch() {
  local variant=$1 world=$2 port path pids=()
  port=$(free_port) || die "no free port on 127.0.0.1"
  path=$(spec "$variant" "$world")
  for ((r = 0; r < world; r++)); do
    (
      [ "$variant" = ctas_default ] || export NCCL_MAX_CTAS=16
      local_rank=$r
      if [ "$variant" = visible_one ]; then export CUDA_VISIBLE_DEVICES=$r; local_rank=0; fi
      if [ "$SHARE" = 1 ]; then  # GPU 0 for all, a NCCL host each (visible_one is base)
        export CUDA_VISIBLE_DEVICES=0 NCCL_HOSTID="multi-gpu-rank$r" NCCL_SOCKET_IFNAME=lo \
          NCCL_IB_DISABLE=1
        local_rank=0
      fi
      # NCCL's log to a file: standard output is the rank's JSON step records.
      [ "$DEVICE" = cuda ] && export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
        NCCL_DEBUG_FILE="$WORK/$variant.rank$r.nccl"
      RANK=$r WORLD_SIZE=$world LOCAL_RANK=$local_rank LOCAL_WORLD_SIZE=$world \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        TRELLIS_COMM_TIMEOUT_S=${TRELLIS_COMM_TIMEOUT_S:-300} \
        exec "$BIN/trellis-train" "$path" --data "$WORK/data.corpus" --json \
        > "$WORK/$variant.rank$r.jsonl" 2> "$WORK/$variant.rank$r.err"
    ) &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  if [ $rc != 0 ]; then
    echo "multi_gpu.sh: $variant failed; each rank's last lines:"
    for ((r = 0; r < world; r++)); do
      echo "-- rank $r ($WORK/$variant.rank$r.err)"
      tail -n 8 "$WORK/$variant.rank$r.err"
    done
  fi
  head -n 1 "$WORK/$variant.rank0.err"
}

for v in $VARIANTS; do
  log "train $v"
  if [ "$v" = one_gpu ]; then launch "$v" 1; else launch "$v" "$NGPU"; fi
done

log "summary"
if [ "$DEVICE" = cuda ]; then
  gpus="$NGPU x"
  [ "$SHARE" = 1 ] && gpus="$NGPU ranks sharing 1 x"
  machine="$gpus $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), torch $(python3 -c 'import torch; print(torch.__version__)'), NCCL $(grep -ohm1 'NCCL version [^ ]*' "$WORK"/base.rank0.nccl 2>/dev/null | head -1 | cut -d' ' -f3)"
else
  machine="$(getconf _NPROCESSORS_ONLN) CPU cores (gloo)"
fi
settings="STEPS=$STEPS WARMUP=$WARMUP DEVICE=$DEVICE PREFETCH_LAYERS=$PREFETCH_LAYERS"
settings="$settings ROWS_PER_GPU=$ROWS_PER_GPU${MICRO_BATCH:+ MICRO_BATCH=$MICRO_BATCH}"
settings="$settings${LAYERS:+ LAYERS=$LAYERS}"
name="${NGPU}gpu"
[ "$SHARE" = 1 ] && name="${NGPU}ranks-1gpu" && settings="$settings SHARE_ONE_GPU=1"
python3 bench/gpu/multi_gpu_summary.py "$WORK" \
  "$OUT_DIR/multi-gpu-$name$SIZE_TAG-$(date -u +%Y-%m-%d)" \
  "bench/gpu/multi_gpu.sh $NGPU ($settings)" "$NGPU" "$WARMUP" \
  "$VARIANTS" "$machine"
