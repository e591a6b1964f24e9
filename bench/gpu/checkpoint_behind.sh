#!/usr/bin/env bash
# What checkpoints cost a run on a GPU, written in place vs behind the steps
# (checkpoint.async): builds trellis-train, trellis-corpus and checkpoint_test
# (TRELLIS_TRAINER_ONLY, against the python package's LibTorch), runs
# checkpoint_test there (its GPU cases: the copy on a stream of its own), then
# bench/checkpoint/behind.py once per entry of CONFIGS. The checkpoints are
# spaced so that the local disk (about 0.8 GiB/s) can write each before the
# next is due: a 2-layer moe-bench rank holds 6.2 GiB.
#
# Needs the header-only deps staged by deploy/gpu/stage-headers.sh (carry
# .third_party). Usage: bench/gpu/checkpoint_behind.sh
#   env: BUILD_DIR=build-gpu OUT=bench/results CONFIGS="LAYERS:STEPS:EVERY ..." (default
#        "2:100:30 4:100:40"), PROFILE=1 (builds with -DTRELLIS_KERNEL_PROFILE=ON: the step
#        that begins the first checkpoint and the next are profiled; PROFILE_AT=<step> another),
#        the rest as behind.py reads it
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT=${OUT:-bench/results}
CONFIGS=${CONFIGS:-2:100:30 4:100:40}
THIRD_PARTY_INCLUDE=${THIRD_PARTY_INCLUDE:-$PWD/.third_party/include}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log() { echo "== $(date -u +%H:%M:%S) $*"; }
die() { echo "checkpoint_behind.sh: $*" >&2; exit 1; }
mkdir -p "$OUT"
[ -f "$THIRD_PARTY_INCLUDE/toml++/toml.h" ] || [ -f /usr/include/toml++/toml.h ] ||
  die "no toml++ headers: run deploy/gpu/stage-headers.sh on a Debian machine and carry .third_party"

log "build ($BUILD_DIR)"
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || die "no torch"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_UNITY_BUILD=OFF -DTRELLIS_TRAINER_ONLY=ON \
  -DTRELLIS_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DTRELLIS_THIRD_PARTY_INCLUDE="$THIRD_PARTY_INCLUDE" -DCMAKE_PREFIX_PATH="$prefix" \
  -DTRELLIS_KERNEL_PROFILE="$([ "${PROFILE:-0}" = 1 ] && echo ON || echo OFF)" \
  > "$OUT/checkpoint-behind-cmake.log" 2>&1 || { tail -30 "$OUT/checkpoint-behind-cmake.log"; die cmake; }
ninja -C "$BUILD_DIR" -j "$(nproc)" trellis-train trellis-corpus checkpoint_test \
  > "$OUT/checkpoint-behind-build.log" 2>&1 \
  || { grep -E "error" -A5 "$OUT/checkpoint-behind-build.log" | head -60; die build; }

log "checkpoint_test"
"$BUILD_DIR/tests/checkpoint_test" > "$OUT/checkpoint-behind-test.log" 2>&1 \
  || { tail -40 "$OUT/checkpoint-behind-test.log"; die "checkpoint_test failed"; }
grep -E "^\[ +(OK|SKIPPED|FAILED|PASSED) +\]" "$OUT/checkpoint-behind-test.log"

for config in $CONFIGS; do
  IFS=: read -r layers steps every <<< "$config"
  log "behind.py: $layers layers, $steps steps, a checkpoint every $every"
  BUILD_DIR=$BUILD_DIR LAYERS=$layers STEPS=$steps EVERY=$every OUT=$OUT \
    NAME=${NAME_PREFIX:-checkpoint-behind-$(date -u +%F)}-${layers}layers \
    python3 bench/checkpoint/behind.py || die "behind.py ($config)"
done
