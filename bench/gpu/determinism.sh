#!/usr/bin/env bash
# Run-to-run reproducibility on one GPU: CONFIG trained STEPS steps from the
# same weights and batches (same seed and corpus), twice with
# training.deterministic = false (default, default_again) and twice with true
# (deterministic, deterministic_again). The table (bench/gpu/determinism_table.py)
# says whether each pair gives the same losses bit for bit, how far apart
# they drift where not, and what deterministic mode costs in step time.
# Usage: bench/gpu/determinism.sh   (env: BUILD_DIR=build-gpu, built by bench/gpu/run.sh
#        (with kernels/ unless WITH_KERNELS=OFF was given there); CONFIG=examples/moe-bench.toml
#        STEPS=20 FUSIONS_OFF= (TRELLIS_FUSIONS_OFF for every run) OUT_DIR=bench/results
#        WORK=<temp dir> PROFILE=0 (1: the first run of each mode writes
#        OUT_DIR/determinism-gpu-<config name>-<date>-profile-<label>.txt, its kernels over steps 6-7 by
#        time; needs run.sh's PROFILE=1 build))
# Writes OUT_DIR/determinism-gpu-<config name>-<date>.{md,json}. Exits 1 when a
# run fails or the deterministic pair differs.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
CONFIG=${CONFIG:-examples/moe-bench.toml}
STEPS=${STEPS:-20}
FUSIONS_OFF=${FUSIONS_OFF:-}
PROFILE=${PROFILE:-0}
OUT_DIR=${OUT_DIR:-bench/results}
WORK=${WORK:-$(mktemp -d)}
BIN=$BUILD_DIR/bin
[ -x "$BIN/trellis-train" ] || { echo "missing $BIN/trellis-train: run bench/gpu/run.sh first" >&2; exit 2; }
grep -q '^\[training\]' "$CONFIG" || { echo "$CONFIG: no [training] section to add to" >&2; exit 2; }
! grep -q '^deterministic *=' "$CONFIG" || { echo "$CONFIG sets deterministic itself" >&2; exit 2; }
mkdir -p "$WORK" "$OUT_DIR"
name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$CONFIG" | head -1)
vocab=$(sed -n 's/^vocab = \([0-9]*\).*/\1/p' "$CONFIG" | head -1)
[ -s "$WORK/corpus" ] || "$BIN/trellis-corpus" synthetic "$WORK/corpus" "${vocab:-32000}" 2000000 > /dev/null

# train LABEL DETERMINISTIC: WORK/LABEL.jsonl, or WORK/LABEL.err and a nonzero status.
train() {
  local label=$1 deterministic=$2
  sed -e "s/^\[training\]/&\ndeterministic = $deterministic/" "$CONFIG" > "$WORK/$label.toml"
  echo "$label" >> "$WORK/runs"
  echo "== $(date -u +%H:%M:%S) $label"
  local profile=$([ "$PROFILE" = 1 ] && [[ $label != *_again ]] && echo 6:2)
  TRELLIS_FUSIONS_OFF=$FUSIONS_OFF TRELLIS_PROFILE_STEPS=$profile \
    TRELLIS_PROFILE_OUT="$WORK/$label.kernels.tsv" \
    "$BIN/trellis-train" "$WORK/$label.toml" --data "$WORK/corpus" --steps "$STEPS" --json \
    > "$WORK/$label.jsonl" 2> "$WORK/$label.err" || { tail -3 "$WORK/$label.err" >&2; return 1; }
  head -1 "$WORK/$label.err"
  [ -z "$profile" ] || python3 bench/gpu/kernel_table.py "$WORK/$label.kernels.tsv" 2 \
    "$OUT_DIR/determinism-gpu-$name-$(date -u +%F)-profile-$label.txt" > /dev/null \
    || echo "no kernel table for $label"
}

: > "$WORK/runs"
failed=0
# Alternated, so that a drift of the machine (clocks, heat) falls on both modes.
train default false || failed=1
train deterministic true || failed=1
train default_again false || failed=1
train deterministic_again true || failed=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || true)
GPU_NAME=$gpu python3 bench/gpu/determinism_table.py "$WORK" \
  "$OUT_DIR/determinism-gpu-$name-$(date -u +%F)" \
  "CONFIG=$CONFIG STEPS=$STEPS${FUSIONS_OFF:+ FUSIONS_OFF=$FUSIONS_OFF} bench/gpu/determinism.sh" \
  "$CONFIG" "$(grep -q TRELLIS_WITH_KERNELS "$BUILD_DIR/build.ninja" 2>/dev/null && echo with || echo without)" \
  || failed=1
exit $failed
