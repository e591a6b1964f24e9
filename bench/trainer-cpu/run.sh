#!/usr/bin/env bash
# Tokens/s of the tiny MoE config (examples/tiny-moe.toml) trained by trellis-train on this
# machine's CPU at world sizes 1, 2 and 4 (ranks are processes over gloo on 127.0.0.1; 2 ranks
# per emulated node, so world 4 is 2 nodes x 2 with EP 2). The global batch is the same at every
# world size, so tokens/s compare directly.
# Usage: bench/trainer-cpu/run.sh   (env: BUILD_DIR=build, WARMUP=5, STEPS=30, OUT=bench/results,
#        WORLDS="1 2 4")
# Writes OUT/trainer-cpu-<date>.md and .json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
WARMUP=${WARMUP:-5}
STEPS=${STEPS:-30}
OUT=${OUT:-bench/results}
WORLDS=${WORLDS:-1 2 4}
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
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# run NAME SPEC WORLD -> sets tps_NAME etc.; skips the first WARMUP steps. Every rank gets
# ncores / world OpenMP threads (at least 1). Tokens per step add up over the ranks; the step
# time is rank 0's (the ranks wait for each other in every step).
run() {
  local name=$1 spec=$2 world=$3 port threads pids=()
  port=$(free_port)
  threads=$(( $(nproc) / world )); [ "$threads" -ge 1 ] || threads=1
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$(( world < 2 ? world : 2 )) MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port OMP_NUM_THREADS=$threads \
      "$TRAIN" "$spec" --data "$work/licenses.corpus" --steps $((WARMUP + STEPS)) --json \
      2>"$work/$name.$r.err" >"$work/$name.$r.jsonl" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  tail -n "$STEPS" "$work/$name.0.jsonl" > "$work/$name.measured"
  local tokens seconds
  tokens=$(( $(field tokens < "$work/$name.measured" | head -n 1) * world * STEPS ))
  seconds=$(field step_seconds < "$work/$name.measured" | awk '{s+=$1} END {print s}')
  eval "tps_$name=$(awk -v t="$tokens" -v s="$seconds" 'BEGIN {printf "%.0f", t/s}')"
  eval "step_$name=$(awk -v n="$STEPS" -v s="$seconds" 'BEGIN {printf "%.4f", s/n}')"
  for f in fwd_seconds bwd_seconds optim_seconds; do
    eval "${f%_seconds}_$name=$(field $f < "$work/$name.measured" | awk '{s+=$1} END {printf "%.4f", s/NR}')"
  done
  eval "loss_$name=$(field loss < "$work/$name.measured" | tail -n 1)"
  eval "desc_$name=\"$(sed 's/^trellis-train: //; s/;.*//' "$work/$name.0.err" | head -n 1)\""
}
sed 's/^dtype = "bfloat16".*/dtype = "float32"/' "$SPEC" > "$work/fp32.toml"
load_before=$(cut -d' ' -f1 /proc/loadavg)
for w in $WORLDS; do
  run "bf16_$w" "$SPEC" "$w"
  run "fp32_$w" "$work/fp32.toml" "$w"
done

date_iso=$(date -u +%Y-%m-%dT%H:%M:%SZ)
day=$(date -u +%Y-%m-%d)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
cores=$(nproc)
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
tokens_per_step=$(( $(field tokens < "$work/bf16_1.measured" | head -n 1) ))
mkdir -p "$OUT"
rows_json=""
rows_md=""
for w in $WORLDS; do
  for d in bf16 fp32; do
    n="${d}_$w"
    eval "tps=\$tps_$n step=\$step_$n fwd=\$fwd_$n bwd=\$bwd_$n opt=\$optim_$n loss=\$loss_$n"
    rows_json+="${rows_json:+,}
    {\"world\": $w, \"dtype\": \"$d\", \"tokens_per_s\": $tps, \"step_seconds\": $step, \"fwd_seconds\": $fwd, \"bwd_seconds\": $bwd, \"optim_seconds\": $opt, \"final_loss\": $loss}"
    rows_md+="| $w | $d | $tps | $step | $fwd | $bwd | $opt | $loss |
"
  done
done
cat > "$OUT/trainer-cpu-$day.json" <<JSON
{
  "benchmark": "trainer-cpu",
  "date": "$date_iso",
  "machine": {"nproc": $cores, "cpu": "$cpu", "load_before": $load_before, "blas": "$blas"},
  "command": "bench/trainer-cpu/run.sh (WARMUP=$WARMUP STEPS=$STEPS WORLDS=\"$WORLDS\")",
  "config": "$SPEC",
  "tokens_per_step": $tokens_per_step,
  "measured_steps": $STEPS,
  "runs": [$rows_json
  ]
}
JSON
cat > "$OUT/trainer-cpu-$day.md" <<MD
# trainer-cpu: tiny MoE, CPU, world sizes $WORLDS

- Date: $date_iso
- Machine: nproc $cores, $cpu; load average before the run $load_before
- BLAS behind LibTorch: $blas (fp32 matmuls); bf16 matmuls go through oneDNN
- Command: \`bench/trainer-cpu/run.sh\` (WARMUP=$WARMUP, STEPS=$STEPS: the first $WARMUP steps are not timed)
- Config: \`$SPEC\` on a byte-level corpus of /usr/share/common-licenses; $tokens_per_step tokens per step
  (global batch, the same at every world size); dtype float32 rows use the same spec with fp32 compute
- Ranks: processes of trellis-train over gloo on 127.0.0.1, 2 per emulated node (world 4 = 2 nodes
  x 2, EP 2), nproc / world OpenMP threads each (at least 1: world 4 oversubscribes 2 cores)
- Model (rank 0 of the largest world): $(eval echo "\$desc_bf16_${WORLDS##* }")

| world | compute dtype | tokens/s | step s | fwd s | bwd s (incl. recompute) | optim s | loss at step $((WARMUP + STEPS)) |
|---|---|---|---|---|---|---|---|
$rows_md
tokens/s = tokens of all ranks over rank 0's step time; the other columns are rank 0's means over
the timed steps. Same figures in trainer-cpu-$day.json.
MD
cat "$OUT/trainer-cpu-$day.md"
