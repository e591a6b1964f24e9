#!/usr/bin/env bash
# A [model] run on 2 nodes x 2 ranks and a spare: trellis-rank hosts
# trainer_core in each rank, its checkpoints written behind the steps
# (checkpoint.async). One rank is SIGKILLed after the first checkpoint;
# the controller relaunches inside the same Slurm job (launch 2), which resumes
# from the newest checkpoint, and the run SUCCEEDS with every step's records at the
# controller and a falling loss.
. "$(dirname "$0")/lib.sh"

[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: built without trainer_core"; exit 77; }
spec=$(tiny_moe_spec -e 's/^steps = .*/steps = 60/' \
  -e 's/^every_steps = .*/every_steps = 10\nasync = true/' -e 's/^backoff_s = .*/backoff_s = 1/' \
  -e 's/^ranks_per_node = 2$/ranks_per_node = 2\nspare_nodes = 1/') ||
  fail "tiny-moe spec not written"

start_controller
id=$(trellis submit "$spec") || fail "submit failed"
log "submitted $id"
run_dir=$(json_get "$(run_json "$id")" "d['run_dir']")

# The first checkpoint, then a rank dies as if its node had failed. The
# files are looked at often and the run's state seldom (a CLI call), so that
# a loaded machine does not let the run finish meanwhile.
deadline=$((SECONDS + 180))
polls=0
until compgen -G "$run_dir/checkpoints/step-*/manifest.json" >/dev/null; do
  if [ $((polls++ % 25)) = 0 ]; then
    case "$(run_state "$id")" in
      FAILED | SUCCEEDED) fail "run ended before its first checkpoint was seen" ;;
    esac
  fi
  [ $SECONDS -lt $deadline ] || fail "no checkpoint within 180 s"
  sleep 0.1
done
victim=$(pgrep -f "trellis-rank --run-dir $run_dir" | head -1)
[ -n "$victim" ] || fail "no rank process found for $run_dir"
kill -KILL "$victim"
log "killed rank process $victim after the first checkpoint"

wait_state "$id" SUCCEEDED 240
show=$(run_json "$id")
[ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "expected 1 attempt (one Slurm job)"
[ "$(json_get "$show" "[l['recovery'] for l in d['launches']]")" = "['relaunch', 'succeed']" ] ||
  fail "launches: $(json_get "$show" "d['launches']")"
[ "$(json_get "$show" "d['launches'][0]['failure_class']")" = signal ] ||
  fail "launch 1 is not classed a signal: $(json_get "$show" "d['launches'][0]")"
[ "$(json_get "$show" "d['last_step']")" = 60 ] || fail "last step is not 60"
[ "$(json_get "$show" "d['recent_steps'][-1]['ranks']")" = 4 ] || fail "step 60 not from 4 ranks"
# Goodput: the kill cost the work after the checkpoint (redone) and the restart.
[ "$(json_get "$show" "d['state_seconds']['redone'] > 0")" = True ] ||
  fail "no redone time: $(json_get "$show" "d['state_seconds']")"
[ "$(json_get "$show" "0 < d['goodput_ratio'] < 1")" = True ] ||
  fail "goodput ratio $(json_get "$show" "d['goodput_ratio']") not in (0, 1)"

# Launch 2 started from the newest checkpoint complete at the kill, not from
# scratch: step 10, or a later one where the ranks got further before the
# kill landed (a loaded machine; behind the steps a checkpoint completes a
# few steps after it began).
resumed=$(grep -o "starting at step [0-9]*" "$run_dir"/attempt-1/launch-2/rank-0.log |
  head -1 | awk '{print $4}')
case "$resumed" in
  10 | 20 | 30 | 40 | 50) ;;
  *) fail "launch 2's rank 0 did not resume from a checkpoint of steps 10-50: '$resumed'" ;;
esac
first2=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT MIN(step) FROM steps WHERE run_id='$id' AND launch=2")
[ -n "$first2" ] && [ "$first2" -gt "$resumed" ] ||
  fail "launch 2 began at step '$first2', expected > $resumed"
grep -q "checkpoint step 10 written behind the steps in" "$run_dir"/attempt-1/launch-1/rank-0.log ||
  fail "launch 1's rank 0 did not write its step-10 checkpoint behind the steps"
# Every step of the run reached the controller from all 4 ranks, and the model learned.
steps=$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT COUNT(DISTINCT step) FROM steps WHERE run_id='$id' AND ranks=4")
[ "$steps" = 60 ] || fail "$steps of 60 steps have records from all 4 ranks"
read -r first last < <(sqlite3 -separator ' ' "$E2E_DIR/controller.db" \
  "SELECT (SELECT loss_sum/ranks FROM steps WHERE run_id='$id' AND step=1),
          (SELECT loss_sum/ranks FROM steps WHERE run_id='$id' AND step=60 AND launch=2)")
python3 -c "import sys; f, l = map(float, sys.argv[1:]); sys.exit(0 if l < f - 1.0 else 1)" \
  "$first" "$last" || fail "loss did not fall: step 1 $first, step 60 $last"
[ -f "$run_dir/checkpoints/step-00000060/manifest.json" ] || fail "no final checkpoint"
log "PASS: $id relaunched in its allocation, resumed at step $resumed after a rank was killed; loss $first -> $last; $(trellis show "$id" | grep '^goodput')"
