#!/usr/bin/env bash
# Runs that could wait forever are told so. A partition the cluster does not
# have is refused at submit once the controller has listed them, naming
# those there are. A run whose job Slurm keeps pending for a reason that
# does not pass (here an administrator's hold: JobHeldAdmin) says Slurm's
# reason in `show` and `watch`, and after --unschedulable-after-s its job is
# cancelled and the run FAILS, nothing left in squeue.
. "$(dirname "$0")/lib.sh"
hello="$(cd "$(dirname "$0")/../.." && pwd)/examples/hello.toml"
use_clean_cluster

start_controller --unschedulable-after-s 8
# Every node busy, so that the run's job pends (Resources) and can be held.
blocker=$(sbatch --parsable -N 4 --exclusive --wrap "sleep 300") || fail "the blocking job was refused"
id=$(trellis submit "$hello") || fail "submit failed"
wait_state "$id" SUBMITTED 30
job=$(sqlite3 "$E2E_DIR/controller.db" "SELECT slurm_job_id FROM attempts WHERE run_id='$id'")
scontrol hold "$job" || fail "scontrol hold $job failed"
trellis watch "$id" >"$E2E_DIR/watch.txt" 2>&1 &
watch_pid=$!
deadline=$((SECONDS + 30))
until trellis show "$id" | grep -F >/dev/null "Slurm keeps job $job pending: JobHeldAdmin (an administrator holds it); the run fails if it stays so for 8 s"; do
  [ $SECONDS -lt $deadline ] || fail "show does not say why the run waits: $(trellis show "$id" | head -3)"
  sleep 0.5
done
wait_state "$id" FAILED 60
wait "$watch_pid" || true
grep -qF "Slurm keeps job $job pending: JobHeldAdmin" "$E2E_DIR/watch.txt" ||
  fail "watch did not say why the run waited: $(cat "$E2E_DIR/watch.txt")"
reason=$(json_get "$(run_json "$id")" "d['state_reason']")
echo "$reason" | grep -F >/dev/null "for 8 s (--unschedulable-after-s): it would not start" || fail "FAILED for another reason: $reason"
wait_job_gone "$job" 30
scancel "$blocker"

out=$(trellis submit "$hello" slurm.partition=gpux 2>&1) && fail "an unknown partition was accepted"
echo "$out" | grep -F >/dev/null "slurm.partition: 'gpux' is not a partition of this cluster; its partitions: debug" ||
  fail "unclear refusal of an unknown partition: $out"
log "PASS: $id failed after Slurm held its job ($reason); an unknown partition refused"
