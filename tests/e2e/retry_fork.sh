#!/usr/bin/env bash
# From one [model] run to its retry and its fork, through the CLI and the
# real cluster, no file edited: examples/tiny-moe-2x2.toml trains 20 steps
# (checkpoints at 10 and 20); `trellis retry RUN training.steps=30` continues
# it exactly from step 20 to 30 (training.init_state "all"); `trellis fork
# RUN --step 10 training.lr=1e-3` starts at step 1 from step 10's weights,
# its first loss far below a fresh start's. `show` names where each came
# from; `report` puts them on one page with their specs' differences; `export`
# writes the retry's model as safetensors. A fork or an export of a step with
# no checkpoint is refused naming the steps there. Each new run keeps hard
# links to its source's step in its own directory (init-from/): the fork trains
# though the source's step is gone before it starts, as after the source's
# pruning. `ls` and the single-run report show the lineage. A retry of a run
# with no checkpoint says so and names --fresh.
. "$(dirname "$0")/lib.sh"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: built without trainer_core"; exit 77; }
"$TRELLIS_BIN/trellis-corpus" build "$E2E_DIR/licenses.corpus" /usr/share/common-licenses >/dev/null ||
  fail "trellis-corpus build failed"
start_controller

steps_of() {  # ID: "first..last" step numbers stored
  sqlite3 "$E2E_DIR/controller.db" "SELECT MIN(step) || '..' || MAX(step) FROM steps WHERE run_id='$1'"
}
loss_at() {  # ID STEP
  sqlite3 "$E2E_DIR/controller.db" "SELECT loss_sum / ranks FROM steps WHERE run_id='$1' AND step=$2 ORDER BY attempt DESC, launch DESC LIMIT 1"
}

src=$(trellis submit "$REPO/examples/tiny-moe-2x2.toml" training.steps=20 checkpoint.every_steps=10 \
  checkpoint.keep=3) || fail "submit failed"
wait_state "$src" SUCCEEDED 240
log "$src trained steps $(steps_of "$src")"

out=$(trellis fork "$src" --step 15 2>&1) && fail "a fork of step 15 (no checkpoint) was accepted"
echo "$out" | grep -F >/dev/null "training.init_from: run $src has no complete checkpoint of step 15; its complete steps: 10, 20" ||
  fail "unclear refusal of a missing step: $out"

# A run stopped before any checkpoint: its retry says there is none and how to start again.
bare=$(trellis submit "$REPO/examples/tiny-moe-2x2.toml" training.steps=5 --name tiny-bare) ||
  fail "submit failed"
trellis cancel "$bare" >/dev/null || fail "cancel of $bare failed"
wait_state "$bare" CANCELLED 60
out=$(trellis retry "$bare" 2>&1) && fail "a retry of $bare (no checkpoint) was accepted"
want="trellis: $bare has no checkpoint to resume from; \`trellis retry $bare --fresh\` starts it"
echo "$out" | grep -F >/dev/null "$want again from step 0" ||
  fail "unclear refusal of a retry without checkpoint: $out"

retry=$(trellis retry "$src" training.steps=30) || fail "retry failed"
fork=$(trellis fork "$src" --step 10 training.lr=1e-3 training.steps=5 --name tiny-fork) || fail "fork failed"
# The source's step 10 goes, as its pruning would take it: the fork's links stay.
src_dir=$(sqlite3 "$E2E_DIR/controller.db" "SELECT run_dir FROM runs WHERE run_id='$src'")
fork_dir=$(sqlite3 "$E2E_DIR/controller.db" "SELECT run_dir FROM runs WHERE run_id='$fork'")
[ -f "$fork_dir/init-from/$src/checkpoints/step-00000010/manifest.json" ] ||
  fail "the fork has no link of $src's step 10 in $fork_dir/init-from"
rm -rf "$src_dir/checkpoints/step-00000010"
trellis show "$fork" | grep -F >/dev/null "step 10 of $src linked into the run's directory" ||
  fail "show of the fork does not say its source step is kept: $(trellis show "$fork")"
fresh=$(trellis submit "$REPO/examples/tiny-moe-2x2.toml" training.steps=5 --name tiny-fresh) || fail "submit failed"
for id in "$retry" "$fork" "$fresh"; do wait_state "$id" SUCCEEDED 240; done

[ "$(steps_of "$retry")" = "21..30" ] || fail "the retry trained steps $(steps_of "$retry"), not 21..30"
[ "$(steps_of "$fork")" = "1..5" ] || fail "the fork trained steps $(steps_of "$fork"), not 1..5"
python3 - "$(loss_at "$fork" 1)" "$(loss_at "$fresh" 1)" "$(loss_at "$src" 11)" <<'PY' ||
import sys
fork, fresh, src11 = map(float, sys.argv[1:])
assert fork < fresh - 1.0, (fork, fresh)  # trained weights, not fresh ones
assert abs(fork - src11) < 0.5, (fork, src11)  # near where the source stood at step 11
PY
  fail "the fork's first loss $(loss_at "$fork" 1) is not that of trained weights (fresh $(loss_at "$fresh" 1), $src at 11: $(loss_at "$src" 11))"
trellis show "$retry" | grep -F >/dev/null "from       $src at step 20 (all)" || fail "show of the retry: $(trellis show "$retry" | head -8)"
trellis show "$fork" | grep -F >/dev/null "from       $src at step 10 (weights)" || fail "show of the fork: $(trellis show "$fork" | head -8)"
# Lineage in the list (a FROM column, init_from in JSON) and in the run's own report.
trellis ls | grep -E "^$fork +.* $src@10 " >/dev/null ||
  fail "ls has no FROM $src@10 for $fork: $(trellis ls)"
trellis ls --json | python3 -c "import json,sys; r={x['run_id']: x for x in json.load(sys.stdin)}; \
assert r['$fork']['init_from'] == '$src@10' and r['$src']['init_from'] == '', r" ||
  fail "ls --json lacks init_from"
trellis report "$fork" --html "$E2E_DIR/fork.html" >/dev/null || fail "report of $fork failed"
grep -qF "<p class=\"lineage\">from $src at step 10 (weights)</p>" "$E2E_DIR/fork.html" ||
  fail "the fork's report does not say where it came from"
# The three compared on one page: the fork's changed learning rate among the differences.
trellis report "$src" "$retry" "$fork" --html "$E2E_DIR/compare.html" >/dev/null || fail "report of 3 runs failed"
for want in "<code>$src</code>" "<code>$fork</code>" "training.lr" "training.init_from" "id=\"loss\""; do
  grep -qF "$want" "$E2E_DIR/compare.html" || fail "the comparison lacks $want"
done
# The retry's trained model out as safetensors, through the CLI; read back
# whole by the test's own safetensors reader, with every tensor of the index.
trellis export "$retry@30" "$E2E_DIR/model" --dtype bfloat16 --json > "$E2E_DIR/export.json" ||
  fail "export failed: $(cat "$E2E_DIR/export.json")"
python3 "$REPO/trainer_core/export/hf_reference.py" "$E2E_DIR/model" > "$E2E_DIR/loaded.json" ||
  fail "the export does not load: $(cat "$E2E_DIR/loaded.json")"
python3 - "$E2E_DIR/export.json" "$E2E_DIR/loaded.json" <<'PY' || fail "export: $(cat "$E2E_DIR/export.json")"
import json, sys
done, loaded = (json.load(open(p)) for p in sys.argv[1:])
assert done["step"] == 30 and done["dtype"] == "bfloat16", done
assert loaded["tensors"] == done["tensors"] and loaded["bytes"] == done["bytes"], (done, loaded)
PY
out=$(trellis export "$retry@25" "$E2E_DIR/model25" 2>&1) && fail "an export of step 25 (no checkpoint) was accepted"
echo "$out" | grep -F >/dev/null "has no complete checkpoint of step 25; its complete steps: " ||
  fail "unclear refusal of a missing step: $out"
log "PASS: $retry continued $src at 21..30; $fork started from its step 10 (loss $(loss_at "$fork" 1) against a fresh $(loss_at "$fresh" 1))"
