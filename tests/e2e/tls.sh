#!/usr/bin/env bash
# TLS on the controller's TCP port, with a pair made by
# deploy/tls/make-self-signed.sh: the CLI without the CA, or with another CA,
# is refused; with it, it works; a run's workers verify the controller too
# and the run succeeds. Over TLS, a worker with a wrong secret cannot register
# or ask for its next launch, and one claiming a node outside the allocation
# is refused; the run they tried to join is untouched.
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)

bash "$REPO/deploy/tls/make-self-signed.sh" "$E2E_DIR/tls" >/dev/null || fail "make-self-signed"
bash "$REPO/deploy/tls/make-self-signed.sh" "$E2E_DIR/other" >/dev/null || fail "make-self-signed"
CA=$E2E_DIR/tls/controller.crt
start_controller --tls-cert "$CA" --tls-key "$E2E_DIR/tls/controller.key"
grep -q "(TLS; workers dial" "$E2E_DIR/controller.log" || fail "controller does not say TLS"

# The CLI: no CA (plain TCP to a TLS port), another CA, then the right one.
set +e
out=$(trellis --timeout 3 ls 2>&1); code=$?
set -e
[ "$code" = 5 ] || fail "ls without the CA: exit $code, expected 5 (unreachable): $out"
echo "$out" | grep >/dev/null -- "--tls-ca" || fail "ls without the CA does not mention --tls-ca: $out"
set +e
out=$(TRELLIS_TLS_CA=$E2E_DIR/other/controller.crt trellis --timeout 3 ls 2>&1); code=$?
set -e
[ "$code" = 5 ] || fail "ls with another CA: exit $code, expected 5: $out"
set +e
out=$(trellis --tls-ca "$E2E_DIR/missing.pem" ls 2>&1); code=$?
set -e
[ "$code" = 2 ] && echo "$out" | grep >/dev/null "missing.pem" || fail "a missing CA file: $code $out"
export TRELLIS_TLS_CA=$CA
trellis ls >/dev/null || fail "ls with the CA failed"
log "CLI: refused without the CA and with another; served with it"

# A run whose workers dial TLS.
id=$(trellis submit "$REPO/examples/hello.toml") || fail "submit failed"
wait_state "$id" SUCCEEDED 120
run_dir=$(json_get "$(run_json "$id")" "d['run_dir']")
grep -q "^TLS_CA=.*controller-ca.pem" "$run_dir/attempt-1/batch.sh" ||
  fail "the batch script names no CA"
log "run $id SUCCEEDED with its workers on TLS"

# Intruders on a running run.
spec=$(write_spec sleeper 'exec sleep 300')
id=$(trellis submit "$spec") || fail "submit failed"
wait_state "$id" RUNNING 90
run_dir=$(json_get "$(run_json "$id")" "d['run_dir']")
secret=$run_dir/attempt-1/secret
[ -s "$secret" ] || fail "no secret file at $secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$E2E_DIR/wrong-secret"
worker() { "$TRELLIS_BIN/trellis-worker" "$@"; }
ident=(--controller "$TRELLIS_ADDR" --tls-ca "$CA" --run "$id" --attempt 1)
set +e
worker agent "${ident[@]}" --launch 1 --secret-file "$E2E_DIR/wrong-secret" --node node1 \
  --run-dir "$run_dir" --register-retry 5 --gate-wait 5 --metrics-listen off \
  >"$E2E_DIR/wrong-secret.log" 2>&1
code=$?
set -e
[ "$code" = 78 ] ||
  fail "a wrong secret's agent: exit $code, expected 78: $(tail -3 "$E2E_DIR/wrong-secret.log")"
out=$(worker next-launch "${ident[@]}" --launch 1 --secret-file "$E2E_DIR/wrong-secret" \
  --node node1 --step-exit-code 0 --timeout 5 2>"$E2E_DIR/next.log")
[ "$out" = "exit 0" ] || fail "next-launch with a wrong secret answered '$out'"
grep -qi "secret\|unauthenticated\|permission" "$E2E_DIR/next.log" ||
  fail "next-launch with a wrong secret: $(cat "$E2E_DIR/next.log")"
set +e
worker agent "${ident[@]}" --launch 1 --secret-file "$secret" --node not-a-node \
  --run-dir "$run_dir" --register-retry 5 --gate-wait 5 --metrics-listen off \
  >"$E2E_DIR/wrong-node.log" 2>&1
code=$?
set -e
[ "$code" = 78 ] || fail "an agent on a node outside the allocation: exit $code, expected 78: \
$(tail -3 "$E2E_DIR/wrong-node.log")"
grep -q "not-a-node" "$E2E_DIR/wrong-node.log" || fail "the refusal does not name the node"
# A worker without the CA cannot reach it at all.
out=$(worker next-launch --controller "$TRELLIS_ADDR" --run "$id" --attempt 1 --launch 1 \
  --secret-file "$secret" --node node1 --step-exit-code 7 --timeout 3 2>/dev/null)
[ "$out" = "exit 7" ] || fail "next-launch without the CA answered '$out'"
[ "$(run_state "$id")" = RUNNING ] || fail "the run was disturbed: $(run_state "$id")"
trellis cancel "$id" >/dev/null || fail "cancel failed"
log "PASS: TLS for the CLI and workers; wrong secret, wrong node and no CA refused"
