#!/usr/bin/env bash
# Tokens/s of the tiny MoE config (examples/tiny-moe.toml) trained by trellis-train on this
# machine's CPU, per compute dtype, BLAS and world size (ranks are processes over gloo on
# 127.0.0.1; 2 ranks per emulated node, so world 4 is 2 nodes x 2 with EP 2). The global batch is
# the same at every world size, so tokens/s compare directly.
# Usage: bench/trainer-cpu/run.sh
#   env: BUILD_DIR=build, WARMUP=5, STEPS=30, OUT=bench/results, WORLDS="1 2 4",
#        DTYPES="bf16 fp32"  (training.dtype per row; "auto" too: what the trainer picks here),
#        THREADS             (OpenMP and OpenBLAS threads per rank; default nproc / world),
#        BLAS=current        (or any of "reference openblas openblas-pthread": the BLAS behind
#                             LibTorch is switched with update-alternatives for those rows, needs
#                             root, and put back as it was, auto or manual, when the script ends;
#                             openblas is the OpenMP build deploy/setup.sh installs;
#                             openblas-pthread needs libopenblas0-pthread installed)
# Writes OUT/trainer-cpu-<date>.md and .json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
WARMUP=${WARMUP:-5}
STEPS=${STEPS:-30}
OUT=${OUT:-bench/results}
WORLDS=${WORLDS:-1 2 4}
DTYPES=${DTYPES:-bf16 fp32}
BLAS=${BLAS:-current}
TRAIN="$BUILD_DIR/bin/trellis-train"
CORPUS_BIN="$BUILD_DIR/bin/trellis-corpus"
SPEC=examples/tiny-moe.toml
for b in "$TRAIN" "$CORPUS_BIN"; do
  [ -x "$b" ] || { echo "missing $b: build first (ninja -C $BUILD_DIR trellis-train trellis-corpus)" >&2; exit 2; }
done
declare -A DTYPE_NAME=([bf16]=bfloat16 [fp32]=float32 [auto]=auto)
for d in $DTYPES; do
  [ -n "${DTYPE_NAME[$d]:-}" ] || { echo "DTYPES: $d is not one of bf16 fp32 auto" >&2; exit 2; }
done

# The BLAS alternatives (Debian): remember them, switch per row group, restore on exit.
# libblas.so.3 is what LibTorch links; OpenBLAS's libblas.so.3 is a wrapper that loads the
# libopenblas.so.0 alternative, so an OpenBLAS build means both.
ARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
LIBDIR=/usr/lib/$ARCH
declare -A BLAS_DIR=([reference]=blas [openblas]=openblas-openmp [openblas-pthread]=openblas-pthread)
alt_field() { update-alternatives --query "$1-$ARCH" | sed -n "s/^$2: //p"; }
declare -A saved_mode saved_value
if [ "$BLAS" != current ]; then
  for b in $BLAS; do
    [ -n "${BLAS_DIR[$b]:-}" ] || { echo "BLAS: $b is not one of current ${!BLAS_DIR[*]}" >&2; exit 2; }
    [ -e "$LIBDIR/${BLAS_DIR[$b]}/libblas.so.3" ] || { echo "BLAS=$b: $LIBDIR/${BLAS_DIR[$b]} is not installed" >&2; exit 2; }
  done
  for lib in libblas.so.3 libopenblas.so.0; do
    update-alternatives --query "$lib-$ARCH" >/dev/null 2>&1 || continue
    saved_mode[$lib]=$(alt_field $lib Status) saved_value[$lib]=$(alt_field $lib Value)
  done
fi
use_blas() {
  update-alternatives --quiet --set "libblas.so.3-$ARCH" "$LIBDIR/${BLAS_DIR[$1]}/libblas.so.3"
  if [ "$1" != reference ]; then
    update-alternatives --quiet --set "libopenblas.so.0-$ARCH" "$LIBDIR/${BLAS_DIR[$1]}/libopenblas.so.0"
  fi
}
restore_blas() {
  for lib in "${!saved_mode[@]}"; do
    if [ "${saved_mode[$lib]}" = auto ]; then update-alternatives --quiet --auto "$lib-$ARCH"
    else update-alternatives --quiet --set "$lib-$ARCH" "${saved_value[$lib]}"; fi
    echo "$lib restored: $(readlink -f "$LIBDIR/$lib") (${saved_mode[$lib]})" >&2
  done
}
# What a process loading libblas.so.3 gets: the reference library, or OpenBLAS's core.
blas_in_use() {
  local blas; blas=$(readlink -f "$LIBDIR/libblas.so.3")
  case "$blas" in */openblas*) readlink -f "$LIBDIR/libopenblas.so.0" ;; *) echo "$blas" ;; esac
}
work=$(mktemp -d)
trap 'restore_blas; rm -rf "$work"' EXIT
"$CORPUS_BIN" build "$work/licenses.corpus" /usr/share/common-licenses >/dev/null
for d in $DTYPES; do
  sed "s/^dtype = .*/dtype = \"${DTYPE_NAME[$d]}\"/" "$SPEC" > "$work/$d.toml"
done

# Mean over the measured steps of one numeric field of the JSON records.
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# run NAME SPEC WORLD -> sets tps_NAME etc.; skips the first WARMUP steps. Every rank gets
# THREADS, or ncores / world (at least 1), threads for OpenMP and for OpenBLAS, as the worker
# caps them.
# Tokens per step add up over the ranks; the step time is rank 0's (the ranks wait for each
# other in every step).
run() {
  local name=$1 spec=$2 world=$3 port threads pids=()
  port=$(free_port)
  threads=${THREADS:-$(( $(nproc) / world ))}; [ "$threads" -ge 1 ] || threads=1
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$(( world < 2 ? world : 2 )) MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
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
  # "..., device cpu, bfloat16 (auto: the CPU has avx512_bf16), torch 1.13.0"
  eval "desc_$name=\"$(sed 's/^trellis-train: //; s/;.*//' "$work/$name.0.err" | head -n 1)\""
  eval "resolved_$name=\"$(sed -n 's/.*device [a-z:0-9]*, \([a-z0-9]*\).*/\1/p' "$work/$name.0.err" | head -n 1)\""
}
load_before=$(cut -d' ' -f1 /proc/loadavg)
for b in $BLAS; do
  if [ "$b" != current ]; then use_blas "$b"; fi
  eval "blas_path_${b//-/_}=$(blas_in_use)"
  for w in $WORLDS; do
    for d in $DTYPES; do run "${b//-/_}_${d}_$w" "$work/$d.toml" "$w"; done
  done
done

date_iso=$(date -u +%Y-%m-%dT%H:%M:%SZ)
day=$(date -u +%Y-%m-%d)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
bf16_flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512_bf16|amx_bf16)$' | tr '\n' ' ' | sed 's/ $//')
cores=$(nproc)
os=$(. /etc/os-release && echo "$PRETTY_NAME")
first=$(echo $BLAS | cut -d' ' -f1 | tr - _)_$(echo $DTYPES | cut -d' ' -f1)_$(echo $WORLDS | cut -d' ' -f1)
tokens_per_step=$(( $(field tokens < "$work/$first.measured" | head -n 1) ))
last_world=${WORLDS##* }
mkdir -p "$OUT"
rows_json="" rows_md="" blas_json="" blas_md=""
for b in $BLAS; do
  eval "bp=\$blas_path_${b//-/_}"
  blas_json+="${blas_json:+, }\"$b\": \"$bp\""
  blas_md+="${blas_md:+; }$b = $bp"
  for w in $WORLDS; do
    for d in $DTYPES; do
      n="${b//-/_}_${d}_$w"
      eval "tps=\$tps_$n step=\$step_$n fwd=\$fwd_$n bwd=\$bwd_$n opt=\$optim_$n loss=\$loss_$n res=\$resolved_$n"
      rows_json+="${rows_json:+,}
    {\"blas\": \"$b\", \"world\": $w, \"dtype\": \"$d\", \"compute_dtype\": \"$res\", \"tokens_per_s\": $tps, \"step_seconds\": $step, \"fwd_seconds\": $fwd, \"bwd_seconds\": $bwd, \"optim_seconds\": $opt, \"final_loss\": $loss}"
      rows_md+="| $b | $w | $d ($res) | $tps | $step | $fwd | $bwd | $opt | $loss |
"
    done
  done
done
cat > "$OUT/trainer-cpu-$day.json" <<JSON
{
  "benchmark": "trainer-cpu",
  "date": "$date_iso",
  "machine": {"nproc": $cores, "cpu": "$cpu", "cpu_bf16_flags": "$bf16_flags", "os": "$os", "load_before": $load_before},
  "command": "${THREADS:+THREADS=$THREADS }WARMUP=$WARMUP STEPS=$STEPS WORLDS=\"$WORLDS\" DTYPES=\"$DTYPES\" BLAS=\"$BLAS\" bench/trainer-cpu/run.sh",
  "config": "$SPEC",
  "blas": {$blas_json},
  "tokens_per_step": $tokens_per_step,
  "measured_steps": $STEPS,
  "runs": [$rows_json
  ]
}
JSON
cat > "$OUT/trainer-cpu-$day.md" <<MD
# trainer-cpu: tiny MoE, CPU, BLAS $BLAS, dtypes $DTYPES, world sizes $WORLDS

- Date: $date_iso
- Machine: nproc $cores, $cpu (bf16 instructions: ${bf16_flags:-none}), $os; load average before the run $load_before
- BLAS behind LibTorch's fp32 matmuls (libblas.so.3): $blas_md; bf16 matmuls go through oneDNN
- Command: \`${THREADS:+THREADS=$THREADS }WARMUP=$WARMUP STEPS=$STEPS WORLDS="$WORLDS" DTYPES="$DTYPES" BLAS="$BLAS" bench/trainer-cpu/run.sh\` (the first $WARMUP steps are not timed)
- Config: \`$SPEC\` with training.dtype set per row, on a byte-level corpus of /usr/share/common-licenses;
  $tokens_per_step tokens per step (global batch, the same at every world size)
- Ranks: processes of trellis-train over gloo on 127.0.0.1, 2 per emulated node (world 4 = 2 nodes
  x 2, EP 2), ${THREADS:-nproc / world} OpenMP and OpenBLAS threads each (at least 1: world 4 oversubscribes 2 cores)
- Model (rank 0 of the largest world): $(eval echo "\$desc_${first%_*}_$last_world")

| BLAS | world | dtype (computed in) | tokens/s | step s | fwd s | bwd s (incl. recompute) | optim s | loss at step $((WARMUP + STEPS)) |
|---|---|---|---|---|---|---|---|---|
$rows_md
tokens/s = tokens of all ranks over rank 0's step time; the other columns are rank 0's means over
the timed steps. Same figures in trainer-cpu-$day.json.
MD
cat "$OUT/trainer-cpu-$day.md"
