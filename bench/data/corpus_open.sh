#!/usr/bin/env bash
# What opening the corpus costs the ranks of one node: RANKS processes open
# the same synthetic corpus of TOKENS tokens at once (bench/data/corpus_open.cc),
# as the ranks of a node do at the start of a run, each under a data root as
# the worker's ranks are. Per rank: the time of ReadCorpus (its checks and
# checksum; the file is in the page cache, just written), its peak resident
# memory, and what it holds afterwards: private memory against file pages
# (shared by the ranks, reclaimable).
# Usage: bench/data/corpus_open.sh LABEL
#   env: BUILD_DIR=build, OUT=bench/results, TOKENS=500000000, RANKS=2,
#        CPUS_PER_RANK=<unset: every rank may use every CPU; N: rank r is bound
#        to CPUs [rN, rN + N), as a worker binds its ranks to their socket>,
#        FORMAT=2 (1: the corpus rewritten in the old format, whose checksum
#        runs on one thread per rank),
#        BASELINE="<earlier runs' .json files, tabled before this one>"
# Writes OUT/corpus-open-<date>-LABEL.json and .md.
set -euo pipefail
cd "$(dirname "$0")/../.."
LABEL=${1:?usage: bench/data/corpus_open.sh LABEL (names this run in the table, e.g. the commit)}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results}
TOKENS=${TOKENS:-500000000}
RANKS=${RANKS:-2}
BASELINE=${BASELINE:-}
CPUS_PER_RANK=${CPUS_PER_RANK:-}
FORMAT=${FORMAT:-2}
[ "$FORMAT" = 1 ] || [ "$FORMAT" = 2 ] || { echo "FORMAT is 1 or 2, got $FORMAT" >&2; exit 2; }
if [ -n "$CPUS_PER_RANK" ]; then
  [ "$CPUS_PER_RANK" -ge 1 ] && [ $((CPUS_PER_RANK * RANKS)) -le "$(nproc)" ] ||
    { echo "CPUS_PER_RANK x RANKS must be in [1, $(nproc)] (the CPUs here)" >&2; exit 2; }
fi
for b in trellis-corpus corpus_open; do
  [ -x "$BUILD_DIR/bin/$b" ] || { echo "missing $BUILD_DIR/bin/$b: build first (ninja -C $BUILD_DIR $b)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BUILD_DIR/bin/trellis-corpus" synthetic "$work/bench.corpus" 32000 "$TOKENS" 1234 4096 > /dev/null
if [ "$FORMAT" = 1 ]; then
  "$BUILD_DIR/bin/corpus_open" "$work/bench.corpus" --write-version-one "$work/v1.corpus"
  mv "$work/v1.corpus" "$work/bench.corpus"
fi
pids=()
for r in $(seq 1 "$RANKS"); do
  bind=()
  [ -z "$CPUS_PER_RANK" ] ||
    bind=(taskset -c "$(((r - 1) * CPUS_PER_RANK))-$((r * CPUS_PER_RANK - 1))")
  "${bind[@]}" "$BUILD_DIR/bin/corpus_open" "$work/bench.corpus" --data-root "$work" \
    > "$work/rank-$r.json" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
mkdir -p "$OUT"
cat "$work"/rank-*.json > "$work/ranks.jsonl"
settings="TOKENS=$TOKENS RANKS=$RANKS${CPUS_PER_RANK:+ CPUS_PER_RANK=$CPUS_PER_RANK} FORMAT=$FORMAT"
python3 - "$work/ranks.jsonl" "$OUT/corpus-open-$(date -u +%F)-$LABEL" "$LABEL" \
  "$(stat -c %s "$work/bench.corpus")" "$BASELINE" \
  "bench/data/corpus_open.sh $LABEL ($settings)" "${CPUS_PER_RANK:-0}" "$FORMAT" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import machine
ranks_path, prefix, label, file_bytes, baseline, command, cpus_per_rank, fmt = sys.argv[1:9]
ranks = [json.loads(l) for l in open(ranks_path)]
def summary(rs):
    return {"ranks": len(rs), "cpus_per_rank": int(cpus_per_rank), "format": int(fmt),
            "check_threads": rs[0].get("check_threads", 0),
            "tokens": rs[0]["tokens"], "documents": rs[0]["documents"],
            "open_s_median": statistics.median(r["open_s"] for r in rs),
            "peak_rss_bytes_max": max(r["peak_rss_bytes"] for r in rs),
            "private_bytes_per_rank": statistics.median(r["private_bytes"] for r in rs),
            "private_bytes_node": sum(r["private_bytes"] for r in rs),
            "file_pages_bytes_per_rank": statistics.median(r["file_pages_bytes"] for r in rs)}
doc = {"benchmark": "corpus-open", "label": label, "date": machine.now_utc(),
       "machine": machine.describe(), "command": command, "file_bytes": int(file_bytes),
       "summary": summary(ranks), "ranks": ranks}
json.dump(doc, open(prefix + ".json", "w"), indent=1)
runs = [json.load(open(b)) for b in baseline.split()] + [doc]
gib = lambda b: f"{b / 2**30:.2f} GiB"
md = [f"# Opening the corpus: time and memory per rank ({doc['date'][:10]})", "",
      f"- Machine: {doc['machine']}", f"- Command: `{command}`" +
      "".join(f"; beside it `{r['command']}` of {r['date'][:10]}" for r in runs[:-1]),
      f"- Corpus: synthetic, {doc['summary']['tokens']:,} tokens in "
      f"{doc['summary']['documents']:,} documents, a file of {gib(doc['file_bytes'])}, in the "
      "page cache (just written). The ranks open it at the same time, each under a data root.",
      "- private: anonymous memory the rank holds after the open, for the whole run (the node "
      "pays it once per rank; the kernel cannot drop it). file pages: the corpus's pages the "
      "rank maps, one copy in the page cache for all ranks of the node, reclaimable.", "",
      "| | " + " | ".join(r["label"] for r in runs) + " |", "|---|" + "---|" * len(runs)]
rows = [("corpus format version", lambda s: str(s.get("format", "?"))),
        ("ranks at once", lambda s: str(s["ranks"])),
        ("CPUs per rank", lambda s: str(s.get("cpus_per_rank") or "all")),
        ("threads checking chunks, per rank", lambda s: str(s.get("check_threads") or "1")),
        ("open (median rank)", lambda s: f"{s['open_s_median']:.2f} s"),
        ("peak resident (max rank)", lambda s: gib(s["peak_rss_bytes_max"])),
        ("private after open, per rank", lambda s: gib(s["private_bytes_per_rank"])),
        ("private after open, all ranks", lambda s: gib(s["private_bytes_node"])),
        ("file pages mapped, per rank", lambda s: gib(s["file_pages_bytes_per_rank"]))]
for name, f in rows:
    md.append(f"| {name} | " + " | ".join(f(r["summary"]) for r in runs) + " |")
open(prefix + ".md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
