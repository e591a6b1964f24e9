#!/usr/bin/env bash
# The GPU tests, one command on a machine with CUDA GPUs and PyTorch 2.x:
# builds trainer_core and kernels/ with their tests (TRELLIS_TRAINER_ONLY,
# against the python package's LibTorch), then runs `ctest -L gpu`: the
# kernels against their CPU references and trainer_core on two GPUs
# (trainer_core/parallel/gpu_multirank_*; on a one-GPU machine both
# ranks share the GPU, over NCCL's socket transport). Run it whenever
# trainer_core/parallel/ or kernels/ change.
#
# Needs the header-only deps staged by deploy/gpu/stage-headers.sh (carry
# .third_party). Usage: bench/gpu/gpu_tests.sh [ctest args]
#   env: BUILD_DIR=build-gpu OUT_DIR=<dir for the logs, default $WORK> WORK=<temp dir>
#        SHARE_ONE_GPU=1 (0: on one GPU, skip the two-rank tests)
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
WORK=${WORK:-$(mktemp -d)}
OUT_DIR=${OUT_DIR:-$WORK}
THIRD_PARTY_INCLUDE=${THIRD_PARTY_INCLUDE:-$PWD/.third_party/include}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log() { echo "== $(date -u +%H:%M:%S) $*"; }
die() { echo "gpu_tests.sh: $*" >&2; exit 1; }
mkdir -p "$OUT_DIR"
[ -f "$THIRD_PARTY_INCLUDE/toml++/toml.h" ] || [ -f /usr/include/toml++/toml.h ] ||
  die "no toml++ headers: run deploy/gpu/stage-headers.sh on a Debian machine and carry .third_party"

log "build ($BUILD_DIR)"
nvidia-smi -L
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || die "no torch"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_UNITY_BUILD=OFF -DTRELLIS_TRAINER_ONLY=ON \
  -DTRELLIS_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DTRELLIS_THIRD_PARTY_INCLUDE="$THIRD_PARTY_INCLUDE" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$OUT_DIR/gpu-cmake.log" 2>&1 || { tail -30 "$OUT_DIR/gpu-cmake.log"; die cmake; }
ninja -C "$BUILD_DIR" -j "$(nproc)" > "$OUT_DIR/gpu-build.log" 2>&1 \
  || { grep -E "error" -A5 "$OUT_DIR/gpu-build.log" | head -60; die build; }

# One GPU: the two-rank tests run with both ranks on it, meeting over NCCL's
# socket transport (gpu_multirank_fixture.h says how), so that the trainer's
# NCCL paths run in every GPU session. SHARE_ONE_GPU=0 skips them instead.
if [ "$(nvidia-smi -L | grep -c '^GPU ')" = 1 ] && [ "${SHARE_ONE_GPU:-1}" = 1 ]; then
  export TRELLIS_RANKS_SHARE_ONE_GPU=1
  log "one GPU: the two-rank tests put both ranks on it"
fi

log "ctest -L gpu"
cd "$BUILD_DIR"
ctest -L gpu -V --timeout 600 "$@" > "$OUT_DIR/gpu-ctest.log" 2>&1
rc=$?
# Each test's own figures (losses, parameter differences, timings) and the verdicts.
# kernels_test is one ctest test: its cases' verdicts are gtest's lines.
grep -hE "cuda world|cuda fp8|cuda:|cuda \(2 ranks|Passed|Failed|Skipped|tests passed|tests failed|\[  (PASSED|FAILED|SKIPPED) " \
  "$OUT_DIR/gpu-ctest.log" | grep -vE "^ *Start" | tail -80
exit $rc
