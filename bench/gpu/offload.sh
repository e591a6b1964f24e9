#!/usr/bin/env bash
# Activation offload on one GPU: examples/moe-bench.toml with activation
# checkpointing, parallel.offload_fraction 0 and 1, STEPS steps each from the
# same weights and batches; the step time, the peaks and the host arena side
# by side (bench/gpu/offload_table.py). The checks of the offload path against
# the CPU are bench/gpu/run.sh's (CHECKS=offload).
# Usage: bench/gpu/offload.sh   (env: BUILD_DIR=build-gpu, built by bench/gpu/run.sh;
#        STEPS=8 OUT_DIR=bench/results WORK=<temp dir>)
# Writes OUT_DIR/offload-gpu-<date>.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
STEPS=${STEPS:-8}
OUT_DIR=${OUT_DIR:-bench/results}
WORK=${WORK:-$(mktemp -d)}
BIN=$BUILD_DIR/bin
[ -x "$BIN/trellis-train" ] || { echo "missing $BIN/trellis-train: run bench/gpu/run.sh first" >&2; exit 2; }
mkdir -p "$WORK" "$OUT_DIR"
"$BIN/trellis-corpus" synthetic "$WORK/moe.corpus" 32000 2000000 > /dev/null
for f in 0 1; do
  sed -e "s/^activation_checkpointing = .*/activation_checkpointing = true\noffload_fraction = $f/" \
    examples/moe-bench.toml > "$WORK/offload$f.toml"
  "$BIN/trellis-train" "$WORK/offload$f.toml" --data "$WORK/moe.corpus" --steps "$STEPS" --json \
    > "$WORK/offload$f.jsonl" 2> "$WORK/offload$f.err" || { cat "$WORK/offload$f.err"; exit 1; }
done
python3 bench/gpu/offload_table.py "$WORK" "$OUT_DIR/offload-gpu-$(date -u +%F)" \
  "bench/gpu/offload.sh (STEPS=$STEPS)"
