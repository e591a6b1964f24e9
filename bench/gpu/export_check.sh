#!/usr/bin/env bash
# A model trained on the GPU, exported, and loaded by other software:
# trellis-train on CUDA trains examples/tiny-moe.toml (a shared expert: the
# Qwen2-MoE layout) and a copy without the shared expert (Mixtral) 6 steps
# with a checkpoint at 5; trellis-export writes step 5; PyTorch's safetensors
# loads every file; where transformers is installed its AutoModelForCausalLM
# loads the directory (no missing or unexpected weight), else the plain-Python
# forward (trainer_core/export/hf_reference.py) runs it; either must give step
# 6's batch the loss trellis-train reported (export_check.py). Then a fork on
# CUDA: training.init_from = step 5's weights starts near step 6's loss.
#
# Needs the header-only deps staged by deploy/gpu/stage-headers.sh (carry
# .third_party). Usage: bench/gpu/export_check.sh
#   env: BUILD_DIR=build-gpu OUT_DIR=<dir for results, default $WORK> WORK=<temp dir>
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
WORK=${WORK:-$(mktemp -d)}
OUT_DIR=${OUT_DIR:-$WORK}
THIRD_PARTY_INCLUDE=${THIRD_PARTY_INCLUDE:-$PWD/.third_party/include}
log() { echo "== $(date -u +%H:%M:%S) $*"; }
die() { echo "export_check.sh: $*" >&2; exit 1; }
mkdir -p "$OUT_DIR" "$WORK"
if [ ! -x "$BUILD_DIR/bin/trellis-export" ]; then
  log "build ($BUILD_DIR)"
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || die "no torch"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRELLIS_UNITY_BUILD=OFF \
    -DTRELLIS_TRAINER_ONLY=ON -DTRELLIS_THIRD_PARTY_INCLUDE="$THIRD_PARTY_INCLUDE" \
    -DCMAKE_PREFIX_PATH="$prefix" > "$WORK/cmake.log" 2>&1 ||
    { tail -30 "$WORK/cmake.log"; die cmake; }
fi
ninja -C "$BUILD_DIR" -j "$(nproc)" trellis-train trellis-corpus trellis-export \
  > "$WORK/build.log" 2>&1 || { grep -E "error" -A5 "$WORK/build.log" | head -40; die build; }
BIN=$BUILD_DIR/bin
DEVICE=${DEVICE:-cuda}  # cpu: the same checks without a GPU
{ [ "$DEVICE" = cuda ] && nvidia-smi -L || echo "device: $DEVICE"; } | tee "$OUT_DIR/export-gpu.txt"
python3 -c 'import transformers; print("transformers", transformers.__version__)' \
  >> "$OUT_DIR/export-gpu.txt" 2>/dev/null ||
  echo "transformers: not installed" >> "$OUT_DIR/export-gpu.txt"
"$BIN/trellis-corpus" synthetic "$WORK/synthetic.corpus" 256 300000 7 > /dev/null || die corpus

# A fork's first loss against its source run's first and sixth.
fork_check() {
  python3 - "$@" <<'PY'
import json, sys
train = [json.loads(l) for l in open(sys.argv[1])]
fork = [json.loads(l) for l in open(sys.argv[2])]
first, fresh, at6 = fork[0]["loss"], train[0]["loss"], train[5]["loss"]
print("%s fork from step 5: first loss %.4f; the run's step 1 %.4f, step 6 %.4f" %
      (sys.argv[3], first, fresh, at6))
assert first < fresh - 0.05, "the fork did not start from trained weights"
PY
}

rc=0
for shared in true false; do
  name=$([ $shared = true ] && echo qwen2_moe || echo mixtral)
  dir=$WORK/$name
  mkdir -p "$dir"
  sets=(--set training.device=$DEVICE --set training.dtype=float32 --set training.global_batch=4
        --set checkpoint.every_steps=5 --set model.shared_expert=$shared)
  log "$name: train 6 steps ($DEVICE)"
  "$BIN/trellis-train" examples/tiny-moe.toml "${sets[@]}" --data "$WORK/synthetic.corpus" \
    --steps 6 --json --checkpoint-dir "$dir/checkpoints" > "$dir/train.jsonl" 2> "$dir/train.err" \
    || { tail -20 "$dir/train.err"; die "train $name"; }
  sed -e "s/^shared_expert = .*/shared_expert = $shared/" \
    -e 's/^global_batch = .*/global_batch = 4/' examples/tiny-moe.toml > "$dir/spec.toml"
  log "$name: export step 5, batches of steps 1..6"
  "$BIN/trellis-export" "$dir/checkpoints@5" "$dir/model" --spec "$dir/spec.toml" --json \
    > "$dir/export.json" || die "export $name"
  "$BIN/trellis-export" "$dir/spec.toml" --data "$WORK/synthetic.corpus" \
    --batches "$dir/batches.safetensors" --steps 6 || die "batches $name"
  log "$name: load and run the export"
  python3 bench/gpu/export_check.py "$dir/model" "$dir/batches.safetensors" 6 "$dir/train.jsonl" \
    > "$OUT_DIR/export-$name.json" || rc=1
  cat "$OUT_DIR/export-$name.json"
  log "$name: fork from step 5's weights ($DEVICE)"
  "$BIN/trellis-train" examples/tiny-moe.toml "${sets[@]}" --data "$WORK/synthetic.corpus" \
    --set training.init_from="$dir/checkpoints@5" --steps 2 --json > "$dir/fork.jsonl" \
    2> "$dir/fork.err" || { tail -20 "$dir/fork.err"; die "fork $name"; }
  fork_check "$dir/train.jsonl" "$dir/fork.jsonl" "$name" | tee -a "$OUT_DIR/export-fork.txt" ||
    rc=1
done
exit $rc
