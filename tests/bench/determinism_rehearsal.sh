#!/usr/bin/env bash
# bench/gpu/determinism.sh on this machine's CPU (examples/tiny-moe.toml, a
# few steps): its four runs, table and JSON; on the CPU every pair is the
# same bits. Then its table on made-up records where the deterministic pair
# differs at step 2: marked so, and the exit status says it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
: "${BUILD_DIR:?the build directory}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$REPO"
BUILD_DIR=$BUILD_DIR CONFIG=examples/tiny-moe.toml STEPS=3 OUT_DIR=$out WORK=$out/work \
  bash bench/gpu/determinism.sh > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
grep -q "device cpu, .*, deterministic, torch" "$out/log" || { cat "$out/log"; exit 1; }
python3 - "$out" <<'PY'
import glob, json, sys
[path] = glob.glob(f"{sys.argv[1]}/determinism-gpu-tiny-moe-*.json")
doc = json.load(open(path))
assert list(doc["runs"]) == ["default", "deterministic", "default_again", "deterministic_again"]
for label, run in doc["runs"].items():
    assert len(run["losses"]) == 3, (label, run)
for name, pair in doc["pairs"].items():
    assert pair["same_bits"] and pair["first_differing_step"] is None, (name, pair)
assert doc["kernels"] == "without" and doc["deterministic_step_time_cost"] is not None
PY

# Made-up records: the deterministic pair differs from step 2.
fake=$out/fake
mkdir -p "$fake"
printf '%s\n' default deterministic default_again deterministic_again > "$fake/runs"
record() { echo "{\"step\": $1, \"loss\": $2, \"tokens\": 100, \"step_seconds\": 0.1, \"fwd_seconds\": 0.03, \"bwd_seconds\": 0.06}"; }
for label in default deterministic default_again; do
  { record 1 5.0; record 2 4.5; record 3 4.0; } > "$fake/$label.jsonl"
done
{ record 1 5.0; record 2 4.5001; record 3 4.0; } > "$fake/deterministic_again.jsonl"
if python3 bench/gpu/determinism_table.py "$fake" "$fake/table" "made up" "made-up.toml" with \
  > "$fake/log" 2>&1; then
  cat "$fake/log"; echo "a differing deterministic pair passed"; exit 1
fi
grep -q "| training.deterministic, run twice (deterministic vs deterministic_again, 3 steps) | no | 2 | 2.22e-05 |" \
  "$fake/table.md" || { cat "$fake/table.md"; exit 1; }
echo "bench/gpu/determinism.sh: ok"
