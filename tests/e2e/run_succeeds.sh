#!/usr/bin/env bash
# examples/hello.toml on 2 nodes x 2 ranks: SUCCEEDED, ranks on two distinct
# nodes, every rank's output kept, step records stored by the controller.
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)

start_controller
id=$(trellis submit "$REPO/examples/hello.toml") || fail "submit failed"
log "submitted $id"
wait_state "$id" SUCCEEDED 120

show=$(run_json "$id")
nodes=$(json_get "$show" "','.join(sorted(set(d['attempts'][0]['nodes'])))")
[ "$(echo "$nodes" | tr ',' '\n' | wc -l)" = 2 ] || fail "expected 2 distinct nodes, got '$nodes'"
[ "$(json_get "$show" "d['attempts'][0]['exit_code']")" = 0 ] || fail "attempt exit code not 0"
last_step=$(json_get "$show" "d['last_step']")
[ "$last_step" = 10 ] || fail "controller saw last step $last_step, expected 10"
ranks=$(json_get "$show" "d['recent_steps'][-1]['ranks']")
[ "$ranks" = 4 ] || fail "step 10 reported by $ranks ranks, expected 4"

logs=$(trellis logs "$id")
for r in 0 1 2 3; do
  echo "$logs" | grep >/dev/null "\[rank $r\] hello from rank $r of 4 on node" || fail "no hello from rank $r"
done
[ "$(trellis logs "$id" --rank 2 | grep -c 'rank 2 done')" = 1 ] || fail "rank 2's log incomplete"
# One node's ranks, each file's last line; the batch script's output; what is not there.
node1=$(json_get "$show" "d['launches'][0]['nodes'][1]")
tail=$(trellis logs "$id" --node "$node1" --tail 1)
[ "$tail" = "$(printf '[rank 2] rank 2 done\n[rank 3] rank 3 done')" ] ||
  fail "logs --node $node1 --tail 1: '$tail'"
trellis logs "$id" --batch >/dev/null || fail "logs --batch failed"
# Each line's time, as the worker noted the logs growing: in the run's life, the
# hello before the end (2 s of steps apart); --since an hour back is all of it,
# a minute ahead none.
trellis logs "$id" --rank 1 --timestamps > "$E2E_DIR/stamped.log" || fail "logs --timestamps failed"
python3 - "$E2E_DIR/stamped.log" "$(json_get "$show" "d['created_unix_ms']")" <<'PY' ||
import datetime, re, sys, time
lines = open(sys.argv[1]).read().splitlines()
created = int(sys.argv[2]) / 1000
times = {}
for line in lines:
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (.*)", line)
    assert m, line
    t = datetime.datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    assert created - 1 <= t <= time.time() + 1, (line, created)
    times["hello" if "hello" in m[2] else "done" if "done" in m[2] else m[2]] = t
assert times["hello"] < times["done"], times
PY
  fail "logs --timestamps: $(cat "$E2E_DIR/stamped.log")"
[ "$(trellis logs "$id" --since 1h)" = "$logs" ] || fail "logs --since 1h is not all of it"
ahead=$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%SZ)
[ -z "$(trellis logs "$id" --since "$ahead")" ] || fail "logs --since $ahead printed lines"
out=$(trellis logs "$id" --rank 7 2>&1) && fail "rank 7 of a 4-rank run was found"
echo "$out" | grep -F >/dev/null "run $id has ranks 0..3; no rank 7" || fail "logs --rank 7: $out"
out=$(trellis logs "$id" --attempt 3 2>&1) && fail "attempt 3 was found"
echo "$out" | grep -F >/dev/null "run $id has no attempt 3; its attempts: 1" || fail "logs --attempt 3: $out"
# The batch script recorded the outcome where it survives Slurm forgetting the job.
grep -q '"exit_code": 0' "$(json_get "$show" "d['run_dir']")/attempt-1/exit.json" ||
  fail "exit.json missing or not 0"
# Owner only (umask 077 in the controller, inherited by the job): the run
# directory, its spec, the secret, the batch script, the rank logs, the database.
run_dir=$(json_get "$show" "d['run_dir']")
bad=$(find "$run_dir" "$E2E_DIR/controller.db" \( -perm /077 \) -printf '%m %p\n')
[ -z "$bad" ] || fail "readable or writable by group or others: $bad"
[ -n "$(find "$run_dir" -name '*.log' -print -quit)" ] || fail "no rank log under $run_dir"
log "PASS: $id on $nodes; its files are its owner's alone"
