#!/usr/bin/env bash
# Group-limited routing (model.expert_groups) against plain top-k on a real
# corpus: the load of the busiest expert-parallel rank over the mean rank's,
# and the loss on text not yet trained on, the same weights and batches for
# every run (bench/routing/expert_load.cc). The model is
# bench/routing/moe-routing.toml (16 experts, top-4), trained on the CPU at
# world 1; each run once with the balance loss alone (training.aux_loss_coef
# 0.01) and once with the aux-loss-free selection bias added
# (training.router_bias_rate).
# Usage: bench/routing/run.sh
#   env: BUILD_DIR=build, OUT=bench/results, TEXTS=/usr/share/doc, STEPS=300,
#        GROUPS_LIST="1 4", EPS="2 4 8", BIAS_RATE=0.001
# Writes OUT/routing-<date>.json and its table (bench/routing/table.py) as .md.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results}
TEXTS=${TEXTS:-/usr/share/doc}
STEPS=${STEPS:-300}
GROUPS_LIST=${GROUPS_LIST:-1 4}
EPS=${EPS:-2 4 8}
BIAS_RATE=${BIAS_RATE:-0.001}
SPEC=bench/routing/moe-routing.toml
for b in trellis-corpus expert_load; do
  [ -x "$BUILD_DIR/bin/$b" ] || { echo "missing $BUILD_DIR/bin/$b: build first (ninja -C $BUILD_DIR $b)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BUILD_DIR/bin/trellis-corpus" build "$work/texts.corpus" "$TEXTS" > "$work/corpus.txt"
args=(--data "$work/texts.corpus" --steps "$STEPS")
for g in $GROUPS_LIST; do args+=(--groups "$g"); done
for e in $EPS; do args+=(--ep "$e"); done
sed -e "s/^warmup_steps = .*/&\nrouter_bias_rate = 0/" "$SPEC" > "$work/plain.toml"
sed -e "s/^warmup_steps = .*/&\nrouter_bias_rate = $BIAS_RATE/" "$SPEC" > "$work/bias.toml"
start=$SECONDS
for v in plain bias; do
  "$BUILD_DIR/bin/expert_load" "$work/$v.toml" "${args[@]}"
done > "$work/runs.jsonl"
seconds=$((SECONDS - start))
mkdir -p "$OUT"
prefix="$OUT/routing-$(date -u +%F)"
python3 - "$work/runs.jsonl" "$prefix" "$TEXTS" "$(cat "$work/corpus.txt")" \
  "bench/routing/run.sh (STEPS=$STEPS GROUPS_LIST=\"$GROUPS_LIST\" EPS=\"$EPS\" BIAS_RATE=$BIAS_RATE TEXTS=$TEXTS)" \
  "$seconds" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import machine
runs_path, prefix, texts, corpus_line, command, seconds = sys.argv[1:7]
runs = [json.loads(l) for l in open(runs_path)]
doc = {"benchmark": "routing", "date": machine.now_utc(),
       "machine": machine.describe(), "command": command, "texts": texts,
       "corpus": corpus_line.split(": ", 1)[-1], "seconds": int(seconds), "runs": runs}
json.dump(doc, open(prefix + ".json", "w"), indent=1)
PY
python3 bench/routing/table.py "$prefix.json" | tee "$prefix.md"
