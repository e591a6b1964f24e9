#!/usr/bin/env bash
# A rank that prints CUDA's out-of-memory message and exits 1: the launch is
# device_oom, and the run FAILS at once with its restarts unused and the
# reason saying what to change, since a relaunch would run out again. The
# same spec with restart.retry_oom=true (from the command line) is relaunched.
. "$(dirname "$0")/lib.sh"

start_controller
cmd='echo "rank $RANK starts"; if [ "$RANK" = 1 ]; then echo "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi; sleep 2'
spec=$(write_spec oom "$cmd" '[restart]' 'max_restarts = 2' 'backoff_s = 1')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" FAILED 60
show=$(run_json "$id")
[ "$(json_get "$show" "len(d['launches'])")" = 1 ] || fail "a relaunch was made"
[ "$(json_get "$show" "d['launches'][0]['failure_class']")" = device_oom ] ||
  fail "launch 1: $(json_get "$show" "d['launches'][0]")"
[ "$(json_get "$show" "d['restarts']")" = 0 ] || fail "restarts were used"
reason=$(json_get "$show" "d['state_reason']")
echo "$reason" | grep -F >/dev/null "device_oom: not retried, it would run out of memory again" ||
  fail "the reason does not say why: $reason"
echo "$reason" | grep -F >/dev/null "restart.retry_oom = true" || fail "the reason does not say what to set: $reason"

again=$(trellis submit "$spec" restart.retry_oom=true) || fail "submit with retry_oom failed"
wait_state "$again" FAILED 90
show=$(run_json "$again")
[ "$(json_get "$show" "len(d['launches'])")" = 3 ] ||
  fail "with retry_oom: $(json_get "$show" "len(d['launches'])") launches, expected 3 (2 restarts)"
log "PASS: $id failed at once ($reason); $again was relaunched twice with restart.retry_oom"
