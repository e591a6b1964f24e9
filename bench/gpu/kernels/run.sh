#!/usr/bin/env bash
# Builds the kernels against the machine's LibTorch 2.x, runs the reference and
# GPU tests, then the kernel benchmark. Logs and JSON go to $OUT (or $1).
# Usage (from the repository root, on a machine with an H200 and PyTorch):
#   bench/gpu/kernels/run.sh [out_dir]
# Each step runs under a time limit, so a hung kernel costs minutes, not the
# whole session; a grouped-GEMM hang leaves the other groups benchmarked.
# Exits 1 when a test failed or hung, after the benchmark.
set -uo pipefail
out=${1:-${OUT:-bench-out}}
mkdir -p "$out"
build=build-gpu-kernels
pfx=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch;print("torch", torch.__version__, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv

cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_TRAINER_ONLY=ON \
  -DTRELLIS_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DTRELLIS_THIRD_PARTY_INCLUDE="$PWD/.third_party/include" -DCMAKE_PREFIX_PATH="$pfx" \
  > "$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
# Tests and the benchmark build together; tests run first.
ninja -C $build -j"$(nproc)" kernels_ref_test kernels_test trellis-kernel-bench > "$out/build.log" 2>&1 \
  || { grep -E "error" -A6 "$out/build.log" | head -80; exit 1; }
# The Hopper main loop must show up as HGMMA in the machine code.
cuobjdump -sass ./$build/tests/kernels_test 2>/dev/null | grep -oE "HGMMA\.[0-9A-Za-z.]+" | sort | uniq -c
./$build/tests/kernels_ref_test > "$out/kernels_ref_test.log" 2>&1
ref_rc=$?
echo "kernels_ref_test rc=$ref_rc $(tail -1 "$out/kernels_ref_test.log")"
timeout 120 ./$build/tests/kernels_test > "$out/kernels_test.log" 2>&1
test_rc=$?
echo "kernels_test rc=$test_rc $(tail -1 "$out/kernels_test.log")"
grep -E "seed|Failure|FAILED|rel error" -A3 "$out/kernels_test.log" | grep -v "NS \[" | head -60
[ $test_rc -eq 124 ] && tail -3 "$out/kernels_test.log"

bench=./$build/bin/trellis-kernel-bench
if [ $test_rc -eq 124 ]; then  # something hung: benchmark the groups one by one
  for g in fp8 acc moe ns gemm; do
    timeout 90 $bench --only $g --json "$out/kernels-bench-$g.json" 2>&1 | tee -a "$out/bench.log"
  done
else
  timeout 300 $bench --json "$out/kernels-bench.json" 2>&1 | tee "$out/bench.log"
  echo "bench rc=${PIPESTATUS[0]}"
fi
[ $ref_rc -eq 0 ] && [ $test_rc -eq 0 ] \
  || { echo "kernels/run.sh: tests failed (kernels_ref_test rc $ref_rc, kernels_test rc $test_rc)"; exit 1; }
