#!/usr/bin/env bash
# Every rank exits 79 (the documented "do not retry" code): the run ends
# FAILED at once with its restarts unused, no relaunch, no new Slurm job, and
# no node is struck.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

start_controller
spec=$(write_spec usererr "exec python3 $STEPS_PY" '[restart]' 'max_restarts = 3' 'backoff_s = 1' \
  '[env]' 'STEPS = "3"' 'EXIT_CODE = "79"')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" FAILED 60
show=$(run_json "$id")
[ "$(json_get "$show" "len(d['attempts'])")" = 1 ] || fail "a new attempt was made"
[ "$(json_get "$show" "len(d['launches'])")" = 1 ] || fail "a relaunch was made"
[ "$(json_get "$show" "d['launches'][0]['failure_class']")" = user_error ] ||
  fail "launch 1: $(json_get "$show" "d['launches'][0]")"
[ -z "$(json_get "$show" "d['launches'][0]['blamed_node']")" ] || fail "a node was blamed"
[ "$(json_get "$show" "d['restarts']")" = 0 ] || fail "restarts were used"
trellis nodes --json >"$E2E_DIR/nodes.json"
[ "$(json_get "$E2E_DIR/nodes.json" "len(d)")" = 0 ] || fail "a node was struck: $(cat "$E2E_DIR/nodes.json")"
log "PASS: $id failed once: $(json_get "$show" "d['state_reason']")"
