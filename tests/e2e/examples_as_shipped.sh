#!/usr/bin/env bash
# Every file in examples/ submits as shipped: each passes `--dry-run` on a
# controller whose data root holds the corpora the examples name
# ("licenses.corpus", "moe-bench.corpus"), and the ones this cluster can run
# (no GPUs: all but moe-bench) SUCCEED for real, unedited; the [model] ones
# shortened from the command line (training.steps=...), as a user would.
. "$(dirname "$0")/lib.sh"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"

[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: built without trainer_core"; exit 77; }
"$TRELLIS_BIN/trellis-corpus" build "$E2E_DIR/licenses.corpus" /usr/share/common-licenses >/dev/null ||
  fail "trellis-corpus build failed"
"$TRELLIS_BIN/trellis-corpus" synthetic "$E2E_DIR/moe-bench.corpus" 32000 20000 >/dev/null ||
  fail "trellis-corpus synthetic failed"
start_controller

n=0
for example in "$REPO"/examples/*.toml; do
  out=$(trellis submit "$example" --dry-run 2>&1) || fail "$(basename "$example") --dry-run: $out"
  n=$((n + 1))
done
# A relative corpus is looked for under the data roots; the dry run shows where it was found.
dry=$(trellis submit "$REPO/examples/tiny-moe-2x2.toml" --dry-run)
echo "$dry" | grep -F >/dev/null "data = '$E2E_DIR/licenses.corpus'" ||
  fail "the resolved spec does not name the corpus found: $(echo "$dry" | grep '^data')"
log "$n examples pass --dry-run"

# A corpus in no data root is named with where it was looked for.
out=$(trellis submit "$REPO/examples/tiny-moe-2x2.toml" training.data=missing.corpus 2>&1) &&
  fail "a missing corpus was accepted"
echo "$out" | grep -F >/dev/null "training.data: \"missing.corpus\" is in no data root of this controller (looked for $E2E_DIR/missing.corpus" ||
  fail "unclear refusal of a missing corpus: $out"

ids=()
ids+=("$(trellis submit "$REPO/examples/hello.toml")") || fail "hello.toml"
ids+=("$(trellis submit "$REPO/examples/tiny-moe-2x2.toml" training.steps=20 checkpoint.every_steps=10)") ||
  fail "tiny-moe-2x2.toml"
ids+=("$(trellis submit "$REPO/examples/tiny-moe.toml" training.steps=20)") || fail "tiny-moe.toml"
for id in "${ids[@]}"; do wait_state "$id" SUCCEEDED 240; done
spec_toml=$(json_get "$(run_json "${ids[1]}")" "d['spec_toml']")
echo "$spec_toml" | grep -F >/dev/null "# training.data \"licenses.corpus\" found at $E2E_DIR/licenses.corpus" ||
  fail "the stored spec does not say where its corpus was found: $(echo "$spec_toml" | head -3)"
log "PASS: ${ids[*]} SUCCEEDED from examples/ as shipped"
