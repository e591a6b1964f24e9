#!/usr/bin/env bash
# Activation offload on one GPU: a model with activation checkpointing trained
# STEPS steps at each parallel.offload_fraction of FRACTIONS, from the same
# weights and batches; step time, peaks, host arena and losses side by side
# (bench/gpu/offload_table.py). The fractions of AGAIN run a second time
# (offload_F_again: how far two runs of the same GPU program drift apart, the
# yardstick for offload's own difference), and with NO_CHECKPOINT=1 the model
# runs once more without checkpointing (out of memory is a result there, not a
# failure). The checks of the offload path against the CPU are
# bench/gpu/run.sh's (CHECKS=offload).
# Usage: bench/gpu/offload.sh   (env: BUILD_DIR=build-gpu, built by bench/gpu/run.sh;
#        CONFIG=examples/moe-bench.toml (or bench/gpu/offload-deep.toml) STEPS=8
#        FRACTIONS="0 1" AGAIN="0" NO_CHECKPOINT=0 OUT_DIR=bench/results WORK=<temp dir>)
# Writes OUT_DIR/offload-gpu-<config name>-<date>.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
CONFIG=${CONFIG:-examples/moe-bench.toml}
STEPS=${STEPS:-8}
FRACTIONS=${FRACTIONS:-0 1}
AGAIN=${AGAIN-0}
NO_CHECKPOINT=${NO_CHECKPOINT:-0}
OUT_DIR=${OUT_DIR:-bench/results}
WORK=${WORK:-$(mktemp -d)}
BIN=$BUILD_DIR/bin
[ -x "$BIN/trellis-train" ] || { echo "missing $BIN/trellis-train: run bench/gpu/run.sh first" >&2; exit 2; }
grep -q '^activation_checkpointing = ' "$CONFIG" || { echo "$CONFIG: no activation_checkpointing line to set" >&2; exit 2; }
mkdir -p "$WORK" "$OUT_DIR"
[ -s "$WORK/moe.corpus" ] || "$BIN/trellis-corpus" synthetic "$WORK/moe.corpus" 32000 2000000 > /dev/null

# train LABEL CHECKPOINTING FRACTION: WORK/LABEL.jsonl, or WORK/LABEL.err and
# a nonzero status (the table reports how the run ended).
train() {
  local label=$1 ckpt=$2 fraction=$3
  sed -e "s/^activation_checkpointing = .*/activation_checkpointing = $ckpt\noffload_fraction = $fraction/" \
    "$CONFIG" > "$WORK/$label.toml"
  echo "$label" >> "$WORK/runs"
  "$BIN/trellis-train" "$WORK/$label.toml" --data "$WORK/moe.corpus" --steps "$STEPS" --json \
    > "$WORK/$label.jsonl" 2> "$WORK/$label.err" || { tail -3 "$WORK/$label.err" >&2; return 1; }
}

: > "$WORK/runs"
failed=0
for f in $FRACTIONS; do train "offload_$f" true "$f" || failed=1; done
for f in $AGAIN; do train "offload_${f}_again" true "$f" || failed=1; done
[ "$NO_CHECKPOINT" = 1 ] && { train no_checkpointing false 0 || true; }
name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$CONFIG" | head -1)
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || true) \
  python3 bench/gpu/offload_table.py "$WORK" "$OUT_DIR/offload-gpu-$name-$(date -u +%F)" \
  "CONFIG=$CONFIG STEPS=$STEPS FRACTIONS=\"$FRACTIONS\" AGAIN=\"$AGAIN\" NO_CHECKPOINT=$NO_CHECKPOINT bench/gpu/offload.sh" "$CONFIG"
exit $failed
