#!/usr/bin/env bash
# Notifications: a run's [notify] webhook (a local HTTP server here) and
# command hear its events. A run that SUCCEEDS: "end". A run whose rank
# fails twice with one restart allowed: "restart", then "end" and "failure".
# The controller's --notify-command hears a node's quarantine.
. "$(dirname "$0")/lib.sh"
STEPS_PY="$(cd "$(dirname "$0")" && pwd)/steps.py"

hooks="$E2E_DIR/hooks"
mkdir -p "$hooks"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$port" "$hooks/webhook.jsonl" <<'PY' &
import http.server, sys
port, out = int(sys.argv[1]), sys.argv[2]
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(out, "ab") as f:
            f.write(body + b"\n")
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Hook).serve_forever()
PY
server=$!
trap 'kill $server 2>/dev/null; cleanup' EXIT

start_controller --notify-command "echo \$TRELLIS_EVENT \$TRELLIS_NODE >> $hooks/controller.txt"
notify=('[notify]' "webhook = \"http://127.0.0.1:$port/hook\""
        "command = \"echo \$TRELLIS_EVENT \$TRELLIS_RUN_ID \$TRELLIS_STATE >> $hooks/run.txt\"")
ok=$(trellis submit "$(write_spec ok 'true' "${notify[@]}")") || fail "submit failed"
bad=$(trellis submit "$(write_spec bad "exec python3 $STEPS_PY" '[restart]' 'max_restarts = 1' \
  'backoff_s = 1' "${notify[@]}" '[env]' 'STEPS = "2"' 'EXIT_CODE = "3"')") || fail "submit failed"
wait_state "$ok" SUCCEEDED 60
wait_state "$bad" FAILED 90
trellis quarantine node4 --reason "notify test" >/dev/null || fail "quarantine failed"

deadline=$((SECONDS + 20))
until grep -q "failure $bad FAILED" "$hooks/run.txt" 2>/dev/null &&
      [ "$(grep -c '"event":"' "$hooks/webhook.jsonl" 2>/dev/null)" -ge 4 ] &&
      grep -q "quarantine node4" "$hooks/controller.txt" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "hooks not heard: run $(cat "$hooks/run.txt" 2>/dev/null) webhook $(cat "$hooks/webhook.jsonl" 2>/dev/null) controller $(cat "$hooks/controller.txt" 2>/dev/null)"
  sleep 0.5
done
for line in "end $ok SUCCEEDED" "restart $bad RESTARTING" "end $bad FAILED" "failure $bad FAILED"; do
  [ "$(grep -cxF "$line" "$hooks/run.txt")" = 1 ] ||
    fail "the command did not hear '$line' once: $(cat "$hooks/run.txt")"
done
python3 - "$hooks/webhook.jsonl" "$ok" "$bad" <<'PY' || fail "webhook bodies: $(cat "$hooks/webhook.jsonl")"
import json, sys
events = {(e["event"], e["run_id"]) for e in map(json.loads, open(sys.argv[1]))}
ok, bad = sys.argv[2], sys.argv[3]
for want in [("end", ok), ("restart", bad), ("end", bad), ("failure", bad)]:
    assert want in events, (want, events)
PY
log "PASS: the run hooks heard end, restart and failure; the controller's heard node4's quarantine"
