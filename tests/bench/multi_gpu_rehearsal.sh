#!/usr/bin/env bash
# bench/gpu/multi_gpu.sh rehearsed on the CPU (DEVICE=cpu: gloo, tiny-moe, 2
# ranks): every variant's launch, its spec edits and the summary's table and
# JSON, so that the two-GPU run meets no script error of its own. Checks the
# figures that do not depend on the device: each variant's world and nodes,
# collective time with exposed time inside it, and the variants that compute
# the same numbers (prefetch off, one visible device) giving the same losses.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${TRELLIS_BIN:?"TRELLIS_BIN, the bin directory of a build, is required"}
work=$(mktemp -d /tmp/trellis-mg-rehearsal.XXXXXX)
trap 'rm -rf "$work"' EXIT

# A collective timeout well inside the test's: a stuck variant fails, named.
if ! DEVICE=cpu STEPS=4 WARMUP=1 TRELLIS_COMM_TIMEOUT_S=60 BUILD_DIR="$(dirname "$bin")" \
    OUT_DIR="$work/out" WORK="$work/w" bash "$repo/bench/gpu/multi_gpu.sh" 2 > "$work/log" 2>&1; then
  tail -40 "$work/log"
  echo "FAIL: multi_gpu.sh exited non-zero"
  exit 1
fi
json=$(ls "$work"/out/multi-gpu-2gpu-*.json)
python3 - "$json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
runs, cmp = doc["runs"], doc["comparisons"]
bad = []
want = {"one_gpu": (1, 1), "base": (2, 1), "one_node": (2, 2), "one_node_groups": (2, 2),
        "ctas_default": (2, 1),
        "gather_fp8": (2, 1), "gather_bf16": (2, 1), "grad_fp32": (2, 1), "visible_one": (2, 1),
        "prefetch_off": (2, 1)}
for v, (world, node) in want.items():
    r = runs.get(v)
    if r is None or "error" in r:
        bad.append(f"{v}: {r and r.get('error') or 'no row'}")
        continue
    if (r["world"], r["node_size"], r["steps"]) != (world, node, 4):
        bad.append(f"{v}: world {r['world']} node_size {r['node_size']} steps {r['steps']}, "
                   f"expected {world} {node} 4")
    if world > 1 and not 0 < r["comm_seconds_median"]:
        bad.append(f"{v}: no collective time at world {world}")
    if not 0 <= r["exposed_comm_seconds_median"] <= r["comm_seconds_median"] + 1e-9:
        bad.append(f"{v}: exposed {r['exposed_comm_seconds_median']} outside [0, comm "
                   f"{r['comm_seconds_median']}]")
    if len(r["losses"]) != 4 or not all(0 < x < 20 for x in r["losses"]):
        bad.append(f"{v}: losses {r['losses']}")
# The EP load comes with EP > 1 only: one node of 2 ranks (EP 2), not 2 nodes of 1.
ep = {v: (runs.get(v) or {}).get("ep_load_median") for v in ("one_node", "base", "one_gpu")}
if ep["one_node"] is None or not ep["one_node"] >= 1 or ep["base"] is not None or ep["one_gpu"] is not None:
    bad.append(f"EP load medians {ep}: expected >= 1 for one_node (EP 2) and none at EP 1")
# One expert group per EP rank: every rank gets the same load, every step.
groups_ep = (runs.get("one_node_groups") or {}).get("ep_load_median")
if groups_ep != 1.0:
    bad.append(f"one_node_groups EP load median {groups_ep}, expected exactly 1")
if cmp.get("one_node_vs_groups_tokens_per_s") is None:
    bad.append("no one_node_vs_groups_tokens_per_s comparison")
# Same numbers, other timing or device mapping: the same losses (one thread, gloo).
for k in ("prefetch_off_vs_base_max_loss_diff_10_steps", "same_numerics_max_loss_diff_10_steps"):
    if cmp[k] is None or cmp[k] > 1e-6:
        bad.append(f"{k} = {cmp[k]}, expected 0")
# fp8 weights gathered: other numbers, close ones.
fp8 = cmp["fp8_vs_fp32_gather_max_loss_diff_10_steps"]
if fp8 is None or not 0 < fp8 < 0.05:
    bad.append(f"fp8_vs_fp32_gather_max_loss_diff_10_steps = {fp8}, expected in (0, 0.05)")
if cmp["base_tokens_per_s_per_gpu_vs_1"] is None or cmp["base_vs_prefetch_off_tokens_per_s"] is None:
    bad.append("the overlap's comparisons are missing")
md = open(sys.argv[1][:-len(".json")] + ".md").read()
for v in want:
    if f"| {v} | " not in md:
        bad.append(f"the table has no row {v}")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"ok: {len(want)} variants on 2 CPU ranks")
PY

# Another size: ROWS_PER_GPU rows as MICRO_BATCH-row forwards, in files of its own;
# a MICRO_BATCH that does not divide the rows is refused, naming both.
DEVICE=cpu STEPS=3 WARMUP=1 VARIANTS="one_gpu base" ROWS_PER_GPU=8 MICRO_BATCH=4 \
  TRELLIS_COMM_TIMEOUT_S=60 BUILD_DIR="$(dirname "$bin")" OUT_DIR="$work/out2" WORK="$work/w2" \
  bash "$repo/bench/gpu/multi_gpu.sh" 2 > "$work/log2" 2>&1 || { tail -40 "$work/log2"; exit 1; }
json2=$(ls "$work"/out2/multi-gpu-2gpu-8rows-micro4-*.json) || { echo "FAIL: no -8rows-micro4 result"; exit 1; }
grep -q "^micro_batch = 4$" "$work/w2/base.toml" && grep -q "^global_batch = 16$" "$work/w2/base.toml" ||
  { echo "FAIL: base.toml at 8 rows per rank as 4-row forwards:"; cat "$work/w2/base.toml"; exit 1; }
python3 - "$json2" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
bad = [v for v in ("one_gpu", "base") if "error" in runs.get(v, {"error": 1}) or runs[v]["steps"] != 3]
if bad:
    print(f"FAIL: 8 rows as 4-row forwards: {bad}: {runs}")
    sys.exit(1)
PY
if out=$(DEVICE=cpu ROWS_PER_GPU=8 MICRO_BATCH=3 BUILD_DIR="$(dirname "$bin")" \
    OUT_DIR="$work/out3" WORK="$work/w3" bash "$repo/bench/gpu/multi_gpu.sh" 2 2>&1); then
  echo "FAIL: MICRO_BATCH=3 of 8 rows was accepted"
  exit 1
fi
[[ "$out" == *"MICRO_BATCH must divide ROWS_PER_GPU=8, got '3'"* ]] || { echo "FAIL: $out"; exit 1; }
echo "ok: ROWS_PER_GPU and MICRO_BATCH"
