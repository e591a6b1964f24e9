#!/usr/bin/env bash
# bench/routing/run.sh end to end on a few steps of the test text: it builds
# its corpus, trains every variant, and writes the table and the JSON; in the
# JSON, group-limited routing with one group per EP rank loads every rank
# exactly the same, while plain top-k does not, every loss is finite, and
# the per-layer expert load has every layer, the worst of them the run's.
# Then bench/routing/init.sh on a few steps: its grid of document lengths and
# initial scales with lines added to the spec, each run's step-1 load per
# layer within [1, top-k].
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

BUILD_DIR=$BUILD_DIR OUT=$out SPEC="$REPO/bench/routing/moe-routing.toml" STEPS=2 TOKENS=20000 \
  DOCS="0 16" STDS="0.02 0.006" MODEL_LINES="shared_expert = true" \
  TRAINING_LINES=$'aux_loss_coef = 0.02\nwarmup_steps = 1' \
  bash "$REPO/bench/routing/init.sh" > "$out/init-table.txt" 2>&1 \
  || { cat "$out/init-table.txt"; exit 1; }
python3 - "$out" <<'PY'
import glob, json, math, sys
out = sys.argv[1]
[path] = glob.glob(f"{out}/routing-init-*.json")
doc = json.load(open(path))
runs = doc["runs"]
# GRID=cross: each document length at the first scale, each scale at the first length.
assert [(r["doc_tokens"], r["init_std"]) for r in runs] == [(0, 0.02), (0, 0.006), (16, 0.02)], runs
for r in runs:
    assert math.isfinite(r["first_loss"]) and math.isfinite(r["tail_loss"]), r
    # TRAINING_LINES reached the spec: a new key, and one the spec sets
    # (warmup_steps 20 there: a second line for it would not parse).
    assert r["aux_loss_coef"] == 0.02, r
    layers = r["expert_load_by_layer"]
    assert len(layers) == r["layers"] == 4, r
    for l in layers:
        assert 1.0 <= l["first_step_max_over_mean"] <= r["experts_per_token"], r
        assert l["first_step_max_over_mean"] <= l["worst_max_over_mean"], r
# Another init_std is another model: step 1's loss on the same batch changes.
assert runs[0]["first_loss"] != runs[1]["first_loss"], "init_std did not reach the model"
assert 'MODEL_LINES="shared_expert = true"' in doc["command"], doc["command"]
# Several lines come back as one shell word that gives them again.
assert "TRAINING_LINES=$'aux_loss_coef = 0.02\\nwarmup_steps = 1'" in doc["command"], doc["command"]
assert "\n" not in doc["command"], doc["command"]
table = open(path[:-len(".json")] + ".md").read()
assert "| one document | 0.006 |" in table and "| 16 | 0.02 |" in table, table
print("bench/routing/init.sh: ok,", len(runs), "runs")
PY
