#!/usr/bin/env bash
# The GPU benchmark, one command on a machine with one CUDA GPU, LibTorch 2.x
# through the python3 torch package, and header-only deps (toml++,
# nlohmann-json, CLI11) on the include path or in THIRD_PARTY_INCLUDE:
#   1. builds trainer_core there (TRELLIS_TRAINER_ONLY)
#   2. runs bench/gpu/kernels/run.sh if it exists (KERNELS=0 skips it)
#   3. CHECK=1: the GPU path against the CPU fp32 reference on a tiny config
#   4. writes the moe-bench corpus and initial weights once, measures the bf16
#      matmul peak, then for each batch size of BATCHES writes its token
#      batches (trellis-export) and trains moe-bench STEPS steps with
#      trellis-train (ATen Newton-Schulz, and the one from kernels/ when built
#      with it), PyTorch eager (torch._grouped_mm and the per-expert loop) and
#      PyTorch torch.compile, one process after another
#   5. prints a table per batch size and writes them all to
#      OUT_DIR/trainer-gpu-<date>.{md,json}
# BATCHES: global batches, each GLOBAL[:MICRO] (MICRO: rows per forward, the
# gradients accumulated over GLOBAL / MICRO forwards before one optimizer step,
# in trellis-train (training.micro_batch) and PyTorch alike; absent: one forward).
# The default "2 16:2" is moe-bench's 2 rows, then 16 rows as 8 micro-batches of 2;
# BATCHES="" stops after the checks.
# Usage: bench/gpu/run.sh   (env: STEPS=50 WARMUP=5 BATCHES="2 16:2" KERNELS=1 CHECK=1
#        CHECK_STEPS=15 CHECKS="documents causal micro groups offload" PROFILE=0 (1: every run writes
#        OUT_DIR/profile-<size>-<run>.txt, its CUDA kernels over two steps by time and kind
#        and, for trellis-train, the device's idle gaps;
#        trellis-train is then built with -DTRELLIS_KERNEL_PROFILE=ON)
#        RUNS="trellis trellis_kernel_ns eager_grouped_mm eager_loop compile_grouped_mm"; a run
#        trellis_off_F is trellis_kernel_ns with TRELLIS_FUSIONS_OFF=F (a name of
#        trainer_core/model/fusions.h, or all), to measure what fusion F gains
#        WITH_KERNELS=ON (OFF: trainer_core without kernels/) BUILD_DIR=build-gpu
#        OUT_DIR=bench/results WORK=<temp dir> JOBS=$(nproc)
#        EXPERT_GROUPS=1: moe-bench's model.expert_groups (group-limited routing)
#        OFFLOAD_FRACTION: set, moe-bench with activation checkpointing and this
#        parallel.offload_fraction (unset: moe-bench's own, no checkpointing))
set -uo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-50}
WARMUP=${WARMUP:-5}
KERNELS=${KERNELS:-1}
CHECK=${CHECK:-1}
CHECK_STEPS=${CHECK_STEPS:-15}
CHECKS=${CHECKS:-documents causal micro groups offload}
PROFILE=${PROFILE:-0}
BATCHES=${BATCHES-2 16:2}  # set but empty: checks only
RUNS=${RUNS:-trellis trellis_kernel_ns eager_grouped_mm eager_loop compile_grouped_mm}
WITH_KERNELS=${WITH_KERNELS:-ON}
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT_DIR=${OUT_DIR:-bench/results}
JOBS=${JOBS:-$(nproc)}
THIRD_PARTY_INCLUDE=${THIRD_PARTY_INCLUDE:-$PWD/.third_party/include}
WORK=${WORK:-$(mktemp -d)}
SPEC=examples/moe-bench.toml
EXPERT_GROUPS=${EXPERT_GROUPS:-1}
OFFLOAD_FRACTION=${OFFLOAD_FRACTION:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR" "$WORK"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
die() { echo "run.sh: $*" >&2; exit 1; }

log "build ($BUILD_DIR)"
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || die "no torch"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_UNITY_BUILD=OFF -DTRELLIS_TRAINER_ONLY=ON \
  -DTRELLIS_WITH_CUDA="$WITH_KERNELS" -DTRELLIS_THIRD_PARTY_INCLUDE="$THIRD_PARTY_INCLUDE" \
  -DTRELLIS_KERNEL_PROFILE="$([ "$PROFILE" = 1 ] && echo ON || echo OFF)" \
  -DCMAKE_PREFIX_PATH="$prefix" > "$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log"; die "cmake"; }
ninja -C "$BUILD_DIR" -j "$JOBS" trellis-train trellis-corpus trellis-export > "$WORK/build.log" 2>&1 \
  || { grep -E "error" -A5 "$WORK/build.log" | head -60; die "build"; }
BIN=$BUILD_DIR/bin

check_failed=0  # a failed test or check: exit 1 at the end, after the benchmarks
if [ "$KERNELS" = 1 ] && [ -x bench/gpu/kernels/run.sh ]; then
  log "kernels benchmark"
  bench/gpu/kernels/run.sh || { echo "run.sh: kernel tests or benchmark failed (rc $?), continuing"; check_failed=1; }
fi

# Losses of trellis-train on a tiny config, GPU against the CPU fp32 reference
# (bench/gpu/check_losses.py). Two more runs say what rounding alone does on
# the same trajectory, printed beside: the CPU at one thread (another
# reduction order) and the GPU fp32 run again (its own run-to-run drift).
# Discrete routing amplifies rounding: on tiny-moe the CPU at one thread and
# at 16 are 3e-6 to 6e-6 apart at 15 steps but up to 2.7e-3 at 30, past the
# fp32 tolerance (bench/results/gpu-loss-checks-horizon-2026-12-03.md), so the
# default CHECK_STEPS is 15 and longer checks judge chaos, not correctness.
# A check over its tolerance fails run.sh (exit 1, after any benchmark).
check() {  # CORPUS NAME [MICRO_BATCH [EXPERT_GROUPS [OFFLOAD_FRACTION]]]
  local corpus=$1 name=$2 micro=${3:-0} groups=${4:-1} offload=${5:-0} steps=$CHECK_STEPS
  local base="$WORK/check_$name"
  for v in "cpu float32" "cpu float32 1thread" "cuda float32" "cuda bfloat16" \
    "cuda float32 again"; do
    set -- $v
    local label=$1.$2${3:+.$3} threads=$([ "${3:-}" = 1thread ] && echo 1)
    sed -e "s/^dtype = .*/dtype = \"$2\"/" -e "s/^\[training\]/[training]\ndevice = \"$1\"/" \
      -e "s/^global_batch = .*/&\nmicro_batch = $micro/" \
      -e "s/^experts_per_token = .*/&\nexpert_groups = $groups/" \
      -e "s/^\[training\]/[parallel]\noffload_fraction = $offload\n\n&/" \
      examples/tiny-moe.toml > "$base.$label.toml"
    env ${threads:+OMP_NUM_THREADS=$threads} \
      "$BIN/trellis-train" "$base.$label.toml" --data "$corpus" --steps $steps --json \
      > "$base.$label.jsonl" 2> "$base.$label.err" || { cat "$base.$label.err"; die "check $name $v"; }
  done
  python3 bench/gpu/check_losses.py "$base" "$name" || check_failed=1
}
if [ "$CHECK" = 1 ]; then
  log "GPU vs CPU fp32 on examples/tiny-moe.toml"
  "$BIN/trellis-corpus" build "$WORK/licenses.corpus" /usr/share/common-licenses > /dev/null 2>&1 \
    || "$BIN/trellis-corpus" synthetic "$WORK/licenses.corpus" 256 300000 7 > /dev/null
  "$BIN/trellis-corpus" synthetic "$WORK/tiny_single.corpus" 256 300000 > /dev/null
  # documents: several per row (masked attention); causal: one document (flash);
  # micro: documents in micro-batches of 4 rows (gradient accumulation);
  # groups: documents with group-limited routing (2 groups of 2 experts);
  # offload: documents in micro-batches of 4, the first layer's input in the
  # host arena (parallel.offload_fraction 0.5)
  for c in $CHECKS; do
    [ "$c" = documents ] && check "$WORK/licenses.corpus" documents
    [ "$c" = causal ] && check "$WORK/tiny_single.corpus" causal
    [ "$c" = micro ] && check "$WORK/licenses.corpus" micro 4
    [ "$c" = groups ] && check "$WORK/licenses.corpus" groups 0 2
    [ "$c" = offload ] && check "$WORK/licenses.corpus" offload 4 1 0.5
  done
fi

[ "$check_failed" = 0 ] || echo "run.sh: a kernel test or GPU-vs-CPU check FAILED (above); run.sh will exit 1"
[ -n "$BATCHES" ] || { log "BATCHES empty: checks only"; exit "$check_failed"; }
for b in $BATCHES; do  # refuse a bad list before hours of work
  [[ $b =~ ^[1-9][0-9]*(:[1-9][0-9]*)?$ ]] || die "BATCHES entry '$b' is not GLOBAL or GLOBAL:MICRO"
  global=${b%%:*} micro=${b#*:}; [ "$micro" = "$b" ] && micro=0
  [ "$micro" = 0 ] || [ $((global % micro)) = 0 ] \
    || die "BATCHES entry '$b': micro batch $micro does not divide global batch $global"
done

log "moe-bench inputs"
"$BIN/trellis-corpus" synthetic "$WORK/moe-bench.corpus" 32000 2000000 || die "corpus"
# The weights do not depend on the batch: written once, for every size.
"$BIN/trellis-export" "$SPEC" --data "$WORK/moe-bench.corpus" \
  --weights "$WORK/weights.safetensors" || die "export weights"
python3 bench/gpu/pytorch_moe.py peak --out "$WORK/peak.json" || die "peak"

# One batch size: its spec, batches and runs in $WORK/$tag (summarize.py's inputs).
bench_size() {
  local global=$1 micro=$2 tag=$3 dir="$WORK/$3" spec="$WORK/$3/moe-bench.toml"
  mkdir -p "$dir"
  cp "$WORK/peak.json" "$dir/"
  local offload=()  # OFFLOAD_FRACTION: checkpointing on, the fraction's layers offloaded
  [ -z "$OFFLOAD_FRACTION" ] || offload=(-e "s/^activation_checkpointing = .*/activation_checkpointing \
= true\noffload_fraction = $OFFLOAD_FRACTION/")
  sed -e "s/^global_batch = .*/global_batch = $global\nmicro_batch = $micro/" \
    -e "s/^experts_per_token = .*/&\nexpert_groups = $EXPERT_GROUPS/" \
    "${offload[@]}" "$SPEC" > "$spec"
  grep -q "^micro_batch = $micro$" "$spec" || die "$spec: no global_batch line to set"
  "$BIN/trellis-export" "$spec" --data "$WORK/moe-bench.corpus" --info "$dir/info.json" \
    --batches "$dir/batches.safetensors" --steps "$STEPS" || die "export $tag"
  for run in $RUNS; do
    log "train $run ($tag)"
    case $run in
      trellis|trellis_kernel_ns|trellis_off_*)
        if [ $run != trellis ] &&
          ! grep -q TRELLIS_WITH_KERNELS "$BUILD_DIR/build.ninja"; then
          echo "run.sh: trainer_core was built without kernels/, skipping $run"; continue
        fi
        # PROFILE=1: the same two steps as the PyTorch runs' (after the warm-up).
        # trellis_off_F: the default (kernel Newton-Schulz) with fusion F off.
        TRELLIS_KERNEL_NS=$([ $run = trellis ] && echo 0 || echo 1) \
          TRELLIS_FUSIONS_OFF=$(case $run in trellis_off_*) echo "${run#trellis_off_}" ;; esac) \
          TRELLIS_PROFILE_STEPS=$([ "$PROFILE" = 1 ] && echo "$((WARMUP + 1)):2") \
          TRELLIS_PROFILE_OUT="$dir/$run.kernels.tsv" \
          "$BIN/trellis-train" "$spec" --data "$WORK/moe-bench.corpus" --steps "$STEPS" --json \
          > "$dir/$run.jsonl" 2> "$dir/$run.err" \
          || { tail -20 "$dir/$run.err"; echo "run.sh: $run ($tag) failed, continuing"; }
        if [ "$PROFILE" = 1 ] && [ -s "$dir/$run.kernels.tsv" ]; then
          python3 bench/gpu/kernel_table.py "$dir/$run.kernels.tsv" 2 \
            "$OUT_DIR/profile-${tag}-$run.txt" || echo "run.sh: kernel table of $run failed"
          # The device's idle time and where it falls (trainer_core/profile/timeline.h).
          { echo; cat "$dir/$run.kernels.tsv.timeline.txt"; } >> "$OUT_DIR/profile-${tag}-$run.txt" \
            || echo "run.sh: no timeline for $run"
          # With TRELLIS_PROFILE_HOST=1: what the host stood waiting in (profile/long_spans.h).
          [ -f "$dir/$run.kernels.tsv.long.txt" ] &&
            { echo; cat "$dir/$run.kernels.tsv.long.txt"; } >> "$OUT_DIR/profile-${tag}-$run.txt"
        fi
        head -2 "$dir/$run.err"; sed -n '1p;$p' "$dir/$run.jsonl" ;;
      eager_*|compile_*)
        mode=${run%%_*} experts=${run#*_}
        python3 bench/gpu/pytorch_moe.py train --spec "$spec" \
          --weights "$WORK/weights.safetensors" --batches "$dir/batches.safetensors" \
          --experts "$experts" --steps "$STEPS" --warmup "$WARMUP" \
          $([ "$mode" = compile ] && echo --compile) \
          $([ "$PROFILE" = 1 ] && echo --profile "$OUT_DIR/profile-${tag}-$run.txt") \
          --out "$dir/pytorch_$run.json" > "$dir/pytorch_$run.log" 2>&1 \
          || { tail -30 "$dir/pytorch_$run.log"; echo "run.sh: $run ($tag) failed, continuing"; }
        sed -n '1p;$p' "$dir/pytorch_$run.log" ;;
    esac
  done
  log "summary ($tag)"
  python3 bench/gpu/summarize.py "$dir" "$dir/summary" \
    "bench/gpu/run.sh (STEPS=$STEPS WARMUP=$WARMUP, global_batch $global, micro_batch $micro)" \
    "$WARMUP" || echo "run.sh: summary of $tag failed, continuing"
}

tags=()
for b in $BATCHES; do
  global=${b%%:*} micro=${b#*:}; [ "$micro" = "$b" ] && micro=0
  tag=gb$global$([ "$micro" = 0 ] || echo "_mb$micro")
  bench_size "$global" "$micro" "$tag"
  tags+=("$tag")
done

# Every size's table in one file: Markdown sections, and the JSON summaries
# in a list, each with its global and micro batch.
day=$(date -u +%Y-%m-%d)
log "summary -> $OUT_DIR/trainer-gpu-$day.{md,json}"
command="bench/gpu/run.sh (STEPS=$STEPS WARMUP=$WARMUP BATCHES=\"$BATCHES\"$([ "$EXPERT_GROUPS" = 1 ] || echo " EXPERT_GROUPS=$EXPERT_GROUPS")$([ -z "$OFFLOAD_FRACTION" ] || echo " OFFLOAD_FRACTION=$OFFLOAD_FRACTION"))"
python3 - "$WORK" "$OUT_DIR/trainer-gpu-$day" "$command" "${tags[@]}" <<'PY'
import json, os, sys
work, prefix, command, tags = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
md = ["# trainer-gpu: moe-bench on one GPU, trellis-train vs PyTorch, by batch size", "",
      f"- Command: `{command}`",
      "- Each size: `training.global_batch` rows per optimizer step; with a micro batch, "
      "gradients accumulated over global / micro forwards of that many rows (trellis-train's "
      "`training.micro_batch`, the same in PyTorch)", ""]
sizes = []
for tag in tags:
    path = os.path.join(work, tag, "summary")
    if not os.path.exists(path + ".json"):
        md += [f"## {tag}", "", "no summary (see the log above)", ""]
        continue
    s = json.load(open(path + ".json"))
    info = s["model"]
    micro = info.get("micro_batch", 0)
    title = (f"global_batch {info['global_batch']}" +
             (f", micro_batch {micro} ({info['global_batch'] // micro} forwards per step)"
              if micro else ", one forward per step"))
    sizes.append(dict(global_batch=info["global_batch"], micro_batch=micro, **s))
    body = "\n".join(l for l in open(path + ".md").read().splitlines() if not l.startswith("# "))
    md += [f"## {title}", "", body.strip("\n"), ""]
with open(prefix + ".json", "w") as f:
    json.dump(dict(benchmark="trainer-gpu", command=command, sizes=sizes), f, indent=1)
with open(prefix + ".md", "w") as f:
    f.write("\n".join(md).rstrip("\n") + "\n")
print("\n".join(md))
PY
exit "$check_failed"
