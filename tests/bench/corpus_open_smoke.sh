#!/usr/bin/env bash
# bench/data/corpus_open.sh end to end on a small corpus: two ranks open it at
# once and the script writes the JSON and the table, beside an earlier run
# given as BASELINE; the second run in the old format (FORMAT=1, written by
# corpus_open --write-version-one), each rank bound to one CPU. A mapped corpus
# leaves each rank almost no private memory (less than a tenth of the file)
# and maps all of the file's pages.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
: "${BUILD_DIR:?the build directory}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() { BUILD_DIR=$BUILD_DIR OUT=$out TOKENS=20000000 RANKS=2 BASELINE=${2:-} \
  bash "$REPO/bench/data/corpus_open.sh" "$1"; }
run first > /dev/null
FORMAT=1 CPUS_PER_RANK=1 run second "$(ls "$out"/corpus-open-*-first.json)" > "$out/table.txt"
python3 - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
[path] = glob.glob(f"{out}/corpus-open-*-second.json")
doc = json.load(open(path))
assert doc["label"] == "second" and len(doc["ranks"]) == 2, doc
s = doc["summary"]
assert s["tokens"] == 20000000 and s["ranks"] == 2, s
assert s["format"] == 1 and s["cpus_per_rank"] == 1 and s["check_threads"] == 1, s
assert s["private_bytes_per_rank"] < doc["file_bytes"] / 10, s
assert s["file_pages_bytes_per_rank"] >= 0.99 * doc["file_bytes"], s
assert 0 < s["open_s_median"] < 60, s
table = open(glob.glob(f"{out}/corpus-open-*-second.md")[0]).read()
assert "| | first | second |" in table, table
assert "| corpus format version | 2 | 1 |" in table, table
assert "| CPUs per rank | all | 1 |" in table, table
for row in ("open (median rank)", "private after open, all ranks", "file pages mapped, per rank"):
    assert f"| {row} |" in table, (row, table)
PY
echo "corpus_open smoke: ok"
