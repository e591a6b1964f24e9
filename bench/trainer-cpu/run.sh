#!/usr/bin/env bash
# Tokens/s of the tiny MoE config (examples/tiny-moe.toml) trained in one process on this
# machine's CPU: the baseline the distributed and GPU work improves on.
# Usage: bench/trainer-cpu/run.sh   (env: BUILD_DIR=build, WARMUP=5, STEPS=30, OUT=bench/results)
# Writes OUT/trainer-cpu-<date>.md and .json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
WARMUP=${WARMUP:-5}
STEPS=${STEPS:-30}
OUT=${OUT:-bench/results}
TRAIN="$BUILD_DIR/bin/trellis-train"
CORPUS_BIN="$BUILD_DIR/bin/trellis-corpus"
SPEC=examples/tiny-moe.toml
for b in "$TRAIN" "$CORPUS_BIN"; do
  [ -x "$b" ] || { echo "missing $b: build first (ninja -C $BUILD_DIR trellis-train trellis-corpus)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$CORPUS_BIN" build "$work/licenses.corpus" /usr/share/common-licenses >/dev/null

# Mean over the measured steps of one numeric field of the JSON records.
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
# run NAME SPEC -> sets tps_NAME etc.; skips the first WARMUP steps.
run() {
  local name=$1 spec=$2 log="$work/$1.jsonl"
  "$TRAIN" "$spec" --data "$work/licenses.corpus" --steps $((WARMUP + STEPS)) --json \
    2>"$work/$name.err" >"$log"
  tail -n "$STEPS" "$log" > "$work/$name.measured"
  local tokens seconds
  tokens=$(field tokens < "$work/$name.measured" | awk '{s+=$1} END {print s}')
  seconds=$(field step_seconds < "$work/$name.measured" | awk '{s+=$1} END {print s}')
  eval "tps_$name=$(awk -v t="$tokens" -v s="$seconds" 'BEGIN {printf "%.0f", t/s}')"
  eval "step_$name=$(awk -v n="$STEPS" -v s="$seconds" 'BEGIN {printf "%.4f", s/n}')"
  for f in fwd_seconds bwd_seconds optim_seconds; do
    eval "${f%_seconds}_$name=$(field $f < "$work/$name.measured" | awk '{s+=$1} END {printf "%.4f", s/NR}')"
  done
  eval "loss_$name=$(field loss < "$work/$name.measured" | tail -n 1)"
  eval "desc_$name=\"$(sed 's/^trellis-train: //; s/;.*//' "$work/$name.err" | head -n 1)\""
}
sed 's/^dtype = "bfloat16".*/dtype = "float32"/' "$SPEC" > "$work/fp32.toml"
load_before=$(cut -d' ' -f1 /proc/loadavg)
run bf16 "$SPEC"
run fp32 "$work/fp32.toml"

date_iso=$(date -u +%Y-%m-%dT%H:%M:%SZ)
day=$(date -u +%Y-%m-%d)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
cores=$(nproc)
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
tokens_per_step=$(field tokens < "$work/bf16.measured" | head -n 1)
mkdir -p "$OUT"
cat > "$OUT/trainer-cpu-$day.json" <<JSON
{
  "benchmark": "trainer-cpu",
  "date": "$date_iso",
  "machine": {"nproc": $cores, "cpu": "$cpu", "load_before": $load_before, "blas": "$blas"},
  "command": "bench/trainer-cpu/run.sh (WARMUP=$WARMUP STEPS=$STEPS)",
  "config": "$SPEC",
  "tokens_per_step": $tokens_per_step,
  "measured_steps": $STEPS,
  "tokens_per_s": $tps_bf16,
  "step_seconds": $step_bf16,
  "fwd_seconds": $fwd_bf16, "bwd_seconds": $bwd_bf16, "optim_seconds": $optim_bf16,
  "final_loss": $loss_bf16,
  "fp32": {"tokens_per_s": $tps_fp32, "step_seconds": $step_fp32, "fwd_seconds": $fwd_fp32,
           "bwd_seconds": $bwd_fp32, "optim_seconds": $optim_fp32, "final_loss": $loss_fp32}
}
JSON
cat > "$OUT/trainer-cpu-$day.md" <<MD
# trainer-cpu: tiny MoE, one process, CPU

- Date: $date_iso
- Machine: nproc $cores, $cpu; load average before the run $load_before
- BLAS behind LibTorch: $blas (fp32 matmuls); bf16 matmuls go through oneDNN
- Command: \`bench/trainer-cpu/run.sh\` (WARMUP=$WARMUP, STEPS=$STEPS: the first $WARMUP steps are not timed)
- Config: \`$SPEC\` on a byte-level corpus of /usr/share/common-licenses; $tokens_per_step tokens per step
- Model: $desc_bf16

| compute dtype | tokens/s | step s | fwd s | bwd s | optim s | loss at step $((WARMUP + STEPS)) |
|---|---|---|---|---|---|---|
| bfloat16 (the config) | $tps_bf16 | $step_bf16 | $fwd_bf16 | $bwd_bf16 | $optim_bf16 | $loss_bf16 |
| float32 | $tps_fp32 | $step_fp32 | $fwd_fp32 | $bwd_fp32 | $optim_fp32 | $loss_fp32 |

Figures are means over the timed steps (step s = their total time / $STEPS). Same figures in
trainer-cpu-$day.json (\`tokens_per_s\` is the bf16 config).
MD
cat "$OUT/trainer-cpu-$day.md"
