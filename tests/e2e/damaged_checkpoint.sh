#!/usr/bin/env bash
# A damaged newest checkpoint: a [model] run on 2 nodes x 2 ranks (and a
# spare for the killed rank's node) checkpoints every 10 steps; with the ranks
# paused, one shard of the newest step is cut short and a rank is killed.
# The relaunch resumes from that step and its rank 1 finds the shard damaged
# (exit 74, naming the file): the launch ends as damaged_checkpoint, blaming
# no node, the step is set aside (damaged-step-N, kept) and the next relaunch
# resumes from the newest intact step without using a restart, so the run
# SUCCEEDS with max_restarts = 1.
. "$(dirname "$0")/lib.sh"

[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: built without trainer_core"; exit 77; }
spec=$(tiny_moe_spec -e 's/^steps = .*/steps = 60/' \
  -e 's/^every_steps = .*/every_steps = 10/' -e 's/^keep = .*/keep = 4/' \
  -e 's/^max_restarts = .*/max_restarts = 1/' -e 's/^backoff_s = .*/backoff_s = 1/' \
  -e 's/^ranks_per_node = 2$/ranks_per_node = 2\nspare_nodes = 1/') ||
  fail "tiny-moe spec not written"

start_controller
id=$(trellis submit "$spec") || fail "submit failed"
log "submitted $id"
run_dir=$(json_get "$(run_json "$id")" "d['run_dir']")
ckpt="$run_dir/checkpoints"

deadline=$((SECONDS + 180))
until [ -f "$ckpt/step-00000020/manifest.json" ]; do
  [ $SECONDS -lt $deadline ] || fail "no step-20 checkpoint within 180 s ($(run_state "$id"))"
  sleep 0.1
done
# Paused, the ranks complete no checkpoint while the newest is damaged.
ranks=$(pgrep -f "trellis-rank --run-dir $run_dir" || true)
[ -n "$ranks" ] || fail "no rank process found for $run_dir"
kill -STOP $ranks
newest=$(ls -d "$ckpt"/step-*/manifest.json | sort | tail -1 | xargs dirname)
step=$((10#${newest##*step-}))
shard="$newest/shard-00001-of-00004.bin"
[ -f "$shard" ] || fail "no $shard"
truncate -s $(($(stat -c %s "$shard") / 2)) "$shard"
victim=$(echo "$ranks" | head -1)
kill -KILL "$victim"
kill -CONT $ranks 2>/dev/null || true
log "cut $shard short and killed rank process $victim (newest step $step)"

wait_state "$id" SUCCEEDED 300
show=$(run_json "$id")
launches=$(json_get "$show" "[(l['failure_class'], l['recovery']) for l in d['launches']]")
[ "$(json_get "$show" "[l['failure_class'] for l in d['launches']][1:]")" = \
  "['damaged_checkpoint', 'succeeded']" ] || fail "launches: $launches"
[ "$(json_get "$show" "d['launches'][1]['recovery']")" = relaunch ] || fail "launches: $launches"
[ "$(json_get "$show" "d['launches'][1]['blamed_node']")" = "" ] ||
  fail "a node was blamed for the damaged checkpoint: $(json_get "$show" "d['launches'][1]")"
restarts=$(json_get "$show" "d['restarts']")
[ "$restarts" = 1 ] || fail "restarts: $restarts, expected 1 (the kill's; none for the damage)"
reason=$(json_get "$show" "d['launches'][1]['reason']")
case "$reason" in
  *"damaged checkpoint step $step"*"$shard"*) ;;
  *) fail "the damaged launch's reason does not name step $step and $shard: $reason" ;;
esac
json_get "$show" "[e['reason'] for e in d['events']]" |
  grep -q "checkpoint step $step set aside, resuming from the newest intact one" ||
  fail "no event says step $step was set aside: $(json_get "$show" "d['events']")"
[ -f "$ckpt/damaged-step-$(printf %08d "$step")/manifest.json" ] ||
  fail "step $step was not kept as damaged-step-$(printf %08d "$step")"
resumed=$(grep -o "starting at step [0-9]*" "$run_dir"/attempt-1/launch-3/rank-0.log |
  head -1 | awk '{print $4}')
[ "$resumed" = $((step - 10)) ] || fail "launch 3 resumed from step '$resumed', not $((step - 10))"
[ "$(json_get "$show" "d['last_step']")" = 60 ] || fail "last step is not 60"
log "PASS: $id set damaged step $step aside and resumed from step $resumed: $launches"
