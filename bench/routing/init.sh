#!/usr/bin/env bash
# What the untrained model routes, and why: each layer's busiest expert over
# the mean expert at step 1 (before any update), then over training, for a
# grid of document lengths (trellis-corpus synthetic's DOC_TOKENS: a row's
# attention stops at each document's boundary) and initial weight scales
# (model.init_std). The same tokens, the same batches, and at each init_std
# the same weights in every run (bench/routing/expert_load.cc).
# Usage: bench/routing/init.sh
#   env: BUILD_DIR=build, OUT=bench/results, SPEC=bench/routing/moe-bench-cpu.toml,
#        STEPS=60, TOKENS=200000 (the corpus), DOCS="0 512 64 8" (0: one document),
#        STDS="0.02 0.006 0.002", GRID=cross (each DOCS at the first of STDS and
#        each STDS at the first of DOCS) or full (every pair), NAME=routing-init,
#        MODEL_LINES, TRAINING_LINES (TOML lines "key = value" set in the spec's
#        [model] and [training] tables in every run, replacing the spec's own
#        value: MODEL_LINES="shared_expert = true", TRAINING_LINES="lr = 1e-3")
# Writes OUT/NAME-<date>.json and its table (bench/routing/init_table.py) as .md.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results}
SPEC=${SPEC:-bench/routing/moe-bench-cpu.toml}
STEPS=${STEPS:-60}
TOKENS=${TOKENS:-200000}
DOCS=${DOCS:-0 512 64 8}
STDS=${STDS:-0.02 0.006 0.002}
GRID=${GRID:-cross}
NAME=${NAME:-routing-init}
MODEL_LINES=${MODEL_LINES:-}
TRAINING_LINES=${TRAINING_LINES:-}
die() { echo "init.sh: $*" >&2; exit 2; }
for b in trellis-corpus expert_load; do
  [ -x "$BUILD_DIR/bin/$b" ] || die "missing $BUILD_DIR/bin/$b: build first (ninja -C $BUILD_DIR $b)"
done
[ -f "$SPEC" ] || die "no spec $SPEC"
case $GRID in cross | full) ;; *) die "GRID is cross or full, got '$GRID'" ;; esac
vocab=$(sed -n 's/^vocab *= *\([0-9]*\).*/\1/p' "$SPEC")
[ -n "$vocab" ] || die "$SPEC has no model.vocab"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
read -r -a docs <<< "$DOCS"
read -r -a stds <<< "$STDS"
pairs=()
for d in "${docs[@]}"; do
  for s in "${stds[@]}"; do
    if [ "$GRID" = full ] || [ "$d" = "${docs[0]}" ] || [ "$s" = "${stds[0]}" ]; then
      pairs+=("$d:$s")
    fi
  done
done
start=$SECONDS
: > "$work/runs.jsonl"
for pair in "${pairs[@]}"; do
  d=${pair%%:*} s=${pair##*:}
  corpus="$work/docs$d.corpus"
  [ -f "$corpus" ] || "$BUILD_DIR/bin/trellis-corpus" synthetic "$corpus" "$vocab" "$TOKENS" 1234 "$d" >&2
  # model.init_std (STDS) and the extra lines set in the spec's tables.
  python3 - "$SPEC" "$s" "$MODEL_LINES" "$TRAINING_LINES" > "$work/spec.toml" <<'PY'
import sys
spec, std, model_lines, training_lines = sys.argv[1:5]
# Each line sets its key: the table's own line for that key is dropped, and
# the line added after the table's header.
key = lambda l: l.split("=", 1)[0].strip()
extra = {"[model]": [f"init_std = {std}"] + model_lines.splitlines(),
         "[training]": training_lines.splitlines()}
placed, table = set(), None
for line in open(spec).read().splitlines():
    text = line.strip()
    if text.startswith("["):
        table = text
        print(line)
        if table in extra:
            print("\n".join(extra[table]))
            placed.add(table)
    elif not (table in extra and "=" in text and not text.startswith("#")
              and any(key(l) == key(text) for l in extra[table])):
        print(line)
missing = [t for t, lines in extra.items() if lines and t not in placed]
if missing:  # a table the spec lacks: say so rather than drop the lines
    sys.exit(f"init.sh: {spec} has no {' '.join(missing)} table")
PY
  echo "== doc_tokens $d, init_std $s" >&2
  # --ep 1: only the per-layer expert figures are read (any expert count).
  "$BUILD_DIR/bin/expert_load" "$work/spec.toml" --data "$corpus" --steps "$STEPS" --groups 1 \
      --ep 1 | python3 -c '
import json, sys
d, s = int(sys.argv[1]), float(sys.argv[2])
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"doc_tokens": d, "init_std": s, **r}))' "$d" "$s" >> "$work/runs.jsonl"
done
seconds=$((SECONDS - start))
mkdir -p "$OUT"
prefix="$OUT/$NAME-$(date -u +%F)"
# The spec's device: a GPU run names its GPU.
gpu=""
if grep -q '^device *= *"cuda"' "$SPEC"; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || true)
fi
# The command as one line that reruns it: a value of several lines as $'a\nb'.
word() { case $1 in *$'\n'*) printf '%q' "$1" ;; *) printf '"%s"' "$1" ;; esac; }
lines=${MODEL_LINES:+ MODEL_LINES=$(word "$MODEL_LINES")}${TRAINING_LINES:+ TRAINING_LINES=$(word "$TRAINING_LINES")}
GPU_NAME=$gpu python3 - "$work/runs.jsonl" "$prefix" "$SPEC" "$TOKENS" \
  "bench/routing/init.sh (SPEC=$SPEC STEPS=$STEPS TOKENS=$TOKENS DOCS=\"$DOCS\" STDS=\"$STDS\" GRID=$GRID$lines)" \
  "$seconds" <<'PY'
import json, os, sys
sys.path.insert(0, "bench")
import machine
runs_path, prefix, spec, tokens, command, seconds = sys.argv[1:7]
doc = {"benchmark": "routing-init", "date": machine.now_utc(),
       "machine": machine.describe(os.environ.get("GPU_NAME", "")),
       "command": command, "spec": spec,
       "corpus_tokens": int(tokens), "seconds": int(seconds),
       "runs": [json.loads(l) for l in open(runs_path)]}
json.dump(doc, open(prefix + ".json", "w"), indent=1)
PY
python3 bench/routing/init_table.py "$prefix.json" | tee "$prefix.md"
