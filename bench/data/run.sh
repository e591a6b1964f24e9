#!/usr/bin/env bash
# How evenly the ranks of a step share its attention work, shuffled rows
# against cost bands (training.row_order, trainer_core/data/row_order.h), on a
# real corpus: the byte corpus of a directory of text files (default
# /usr/share/doc: a few thousand documents from a few bytes to megabytes).
# Counts the attention part of the work only (sum of squared document lengths
# per row); the rest of a step costs the same for every row.
# Usage: bench/data/run.sh
#   env: BUILD_DIR=build, OUT=bench/results, TEXTS=/usr/share/doc,
#        SEQ_LENS="4096 8192 32768 65536", RANKS="8 64", SEED=1234
# Writes OUT/row-order-<date>.md and .json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results}
TEXTS=${TEXTS:-/usr/share/doc}
SEQ_LENS=${SEQ_LENS:-4096 8192 32768 65536}
RANKS=${RANKS:-8 64}
SEED=${SEED:-1234}
for b in trellis-corpus row_balance; do
  [ -x "$BUILD_DIR/bin/$b" ] || { echo "missing $BUILD_DIR/bin/$b: build first (ninja -C $BUILD_DIR $b)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BUILD_DIR/bin/trellis-corpus" build "$work/texts.corpus" "$TEXTS" > "$work/corpus.txt"
lens=()
for s in $SEQ_LENS; do lens+=(--seq-len "$s"); done
for r in $RANKS; do
  "$BUILD_DIR/bin/row_balance" "$work/texts.corpus" "${lens[@]}" --ranks "$r" --seed "$SEED"
done > "$work/rows.jsonl"
mkdir -p "$OUT"
python3 - "$work/rows.jsonl" "$OUT/row-order-$(date -u +%F)" "$TEXTS" "$(cat "$work/corpus.txt")" \
  "bench/data/run.sh (SEQ_LENS=\"$SEQ_LENS\" RANKS=\"$RANKS\" SEED=$SEED TEXTS=$TEXTS)" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import machine
rows_path, prefix, texts, corpus_line, command = sys.argv[1:6]
rows = [json.loads(l) for l in open(rows_path)]
doc = {"benchmark": "row-order", "date": machine.now_utc(),
       "machine": machine.describe(), "command": command, "texts": texts,
       "corpus": corpus_line.split(": ", 1)[-1], "rows": rows}
json.dump(doc, open(prefix + ".json", "w"), indent=1)
r0 = rows[0]
md = [f"# Step balance of the row orders on a real corpus ({doc['date'][:10]})", "",
      f"- Machine: {doc['machine']}", f"- Command: `{command}`",
      f"- Corpus: the byte corpus of `{texts}`: {r0['corpus_tokens']:,} tokens in "
      f"{r0['corpus_documents']:,} documents, median document {r0['median_document_tokens']:,} tokens",
      "- A step gives each rank one row (as the production report's run: one row per rank per step); "
      "a row's attention cost is the sum of the squared lengths of the documents in it. Per step, "
      "the costliest rank's attention cost over the mean rank's: averaged over one epoch (mean), at "
      "the worst step (worst), and weighted by the steps' costs (epoch: the epoch's attention time "
      "when each step lasts as long as its costliest rank, over the work itself, i.e. the throughput "
      "lost to waiting). Shuffled rows (`training.row_order = \"shuffled\"`, the default) against "
      "cost bands (`\"cost_bands\"`). Attention only: the rest of a step costs the same for every row.",
      "", "| seq_len | ranks | steps | rows of one document | shuffled: mean | worst | epoch | "
      "cost bands: mean | worst | epoch |", "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    s, b = r["shuffled"], r["cost_bands"]
    md.append(f"| {r['seq_len']:,} | {r['ranks']} | {s['steps']:,} | "
              f"{r['rows_of_one_document'] / r['rows']:.0%} | {s['mean_max_over_mean']:.3f} | "
              f"{s['worst_max_over_mean']:.2f} | {s['epoch_max_over_mean']:.3f} | "
              f"{b['mean_max_over_mean']:.3f} | {b['worst_max_over_mean']:.2f} | "
              f"{b['epoch_max_over_mean']:.3f} |")
open(prefix + ".md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
