#!/usr/bin/env bash
# A variant of an example from the command line, no file edited: `--dry-run`
# shows the spec that would run (every key, defaults filled in, the values
# given over the file's) and the batch script; the real submit runs that
# spec under the name given, stored as the file with the values over it.
. "$(dirname "$0")/lib.sh"
hello="$(cd "$(dirname "$0")/../.." && pwd)/examples/hello.toml"

start_controller
dry=$(trellis submit "$hello" slurm.nodes=1 restart.max_restarts=2 env.GREETING=hi --name one --dry-run) ||
  fail "dry run failed"
for line in "name = 'one'" "nodes = 1" "max_restarts = 2" "GREETING = 'hi'" "backoff_s = 30" \
            "# partition = \"\"  (Slurm's default partition)" "run 'one-1', attempt 1"; do
  echo "$dry" | grep -F >/dev/null "$line" || fail "the dry run lacks \"$line\": $dry"
done
[ "$(trellis ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 0 ] ||
  fail "a dry run stored a run"
trellis submit "$hello" slurm.nodes=1 --name one --json --dry-run |
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert "nodes = 1" in d["resolved_spec"], d' ||
  fail "--json --dry-run has no resolved_spec"

id=$(trellis submit "$hello" slurm.nodes=1 env.GREETING=hi --name one) || fail "submit failed"
[ "$id" = one-1 ] || fail "the run is $id, not one-1 as the dry run said"
wait_state "$id" SUCCEEDED 60
show=$(run_json "$id")
[ "$(json_get "$show" "d['nodes']")" = 1 ] || fail "ran on $(json_get "$show" "d['nodes']") nodes, not 1"
spec_toml=$(json_get "$show" "d['spec_toml']")
echo "$spec_toml" | head -1 | grep -F >/dev/null "# $hello slurm.nodes=1 env.GREETING=hi --name one" ||
  fail "the stored spec does not say where it came from: $(echo "$spec_toml" | head -3)"

# Where the cluster keeps accounting (local-cluster up --accounting): an account or a QOS the
# user has no association for is refused at submit and dry run, once a tick listed them (the run
# above had one). Without accounting nothing is checked: no such refusal.
if assoc=$(sacctmgr -nP show assoc where user="$(id -un)" format=account,qos 2>/dev/null) &&
   [ -n "$assoc" ]; then
  account=${assoc%%|*}
  out=$(trellis submit "$hello" slurm.account=no-such-acct --dry-run 2>&1) &&
    fail "the account no-such-acct was accepted"
  echo "$out" | grep -F >/dev/null "slurm.account: 'no-such-acct' is not an account of yours in Slurm's" ||
    fail "unclear refusal of an unknown account: $out"
  trellis submit "$hello" slurm.account="$account" --dry-run >/dev/null ||
    fail "the user's own account $account was refused"
  out=$(trellis submit "$hello" slurm.account="$account" 'slurm.extra_args=["--qos=no-such-qos"]' \
    --dry-run 2>&1) && fail "the QOS no-such-qos was accepted"
  echo "$out" | grep -F >/dev/null "slurm.extra_args: --qos=no-such-qos is not a QOS of account $account" ||
    fail "unclear refusal of an unknown QOS: $out"
  log "accounting: an unknown account and QOS refused, $account accepted"
else
  trellis submit "$hello" slurm.account=no-such-acct --dry-run >/dev/null ||
    fail "without accounting an account was checked"
fi
log "PASS: $id ran the example with slurm.nodes=1 and --name one, no file edited"
