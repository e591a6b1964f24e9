#!/usr/bin/env bash
# bench/checkpoint/behind.py on this machine's CPU (examples/tiny-moe.toml, a
# few steps): its three runs, table and JSON, so that a GPU session meets no
# error of the script itself. On the CPU the three runs end at the same bits.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
: "${BUILD_DIR:?the build directory}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$REPO"
BUILD_DIR=$BUILD_DIR SPEC=examples/tiny-moe.toml LAYERS=2 GLOBAL_BATCH=16 MICRO_BATCH=4 \
  STEPS=13 EVERY=5 DEVICE=cpu VOCAB=256 OUT=$out NAME=behind \
  python3 bench/checkpoint/behind.py > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/behind.json"))
runs = {r["variant"]: r for r in d["runs"]}
assert set(runs) == {"none", "in_place", "behind"}, runs.keys()
assert runs["none"]["checkpoints"] == 0 and runs["none"]["checkpoint_seconds_sum"] == 0
for v in ("in_place", "behind"):
    assert runs[v]["checkpoints"] == 2, (v, runs[v]["checkpoints"])  # steps 5 and 10
    assert runs[v]["checkpoint_seconds_sum"] > 0, v
assert len(runs["behind"]["checkpoint_waited_seconds"]) == 2, runs["behind"]
for v, r in runs.items():  # each step after a checkpoint began, by step
    assert set(r["step_seconds_after_begin"]) == {"6", "11"}, (v, r["step_seconds_after_begin"])
    assert all(s > 0 for s in r["step_seconds_after_begin"].values()), (v, r)
assert len({r["losses_last"] for r in d["runs"]}) == 1, [r["losses_last"] for r in d["runs"]]
md = open(sys.argv[1] + "/behind.md").read()
assert "| behind |" in md and "bench/checkpoint/behind.py" in md, md
assert "Each step after a checkpoint began, s: none step 6 " in md, md
PY
echo "bench/checkpoint/behind.py: ok"
