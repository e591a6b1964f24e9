#!/usr/bin/env bash
# bench/routing/run.sh end to end on a few steps of the test text: it builds
# its corpus, trains every variant, and writes the table and the JSON; in the
# JSON, group-limited routing with one group per EP rank loads every rank
# exactly the same, while plain top-k does not, every loss is finite, and
# the per-layer expert load has every layer, the worst of them the run's.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
: "${BUILD_DIR:?the build directory}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
texts="$out/texts"
mkdir -p "$texts"
for i in 1 2 3 4; do cp "$REPO/trainer_core/testdata/golden.txt" "$texts/golden$i.txt"; done
BUILD_DIR=$BUILD_DIR OUT=$out TEXTS=$texts STEPS=4 GROUPS_LIST="1 4" EPS="2 4" \
  bash "$REPO/bench/routing/run.sh" > "$out/table.txt"
python3 - "$out" <<'PY'
import glob, json, math, sys
out = sys.argv[1]
[path] = glob.glob(f"{out}/routing-*.json")
doc = json.load(open(path))
runs = doc["runs"]
assert [(r["expert_groups"], r["router_bias_rate"]) for r in runs] == \
    [(1, 0), (4, 0), (1, 0.001), (4, 0.001)], runs
for r in runs:
    assert math.isfinite(r["first_loss"]) and math.isfinite(r["tail_loss"]), r
    for ep in ("2", "4"):
        load = r["ep_rank_load"][ep]
        if r["expert_groups"] == 4:
            assert load["worst_max_over_mean"] == 1.0, (ep, r)
        else:
            assert load["worst_max_over_mean"] > 1.0, (ep, r)
    # One figure per layer, and the run's worst is the worst layer's.
    by_layer = r["expert_load_by_layer"]
    assert len(by_layer) == r["layers"], r
    assert max(l["worst_max_over_mean"] for l in by_layer) == \
        r["expert_load"]["worst_max_over_mean"], r
assert glob.glob(f"{out}/routing-*.md"), "no markdown table"
print("bench/routing/run.sh: ok,", len(runs), "runs")
PY
