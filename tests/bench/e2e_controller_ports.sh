#!/usr/bin/env bash
# bench/gpu/e2e.sh's controller starts while another controller holds the
# default ports (a demo left up: gRPC 127.0.0.1:50151, /metrics 127.0.0.1:9152;
# and e2e.sh's own default 50161), as its rehearsals in the suite do: here the
# ports are held by listeners of this test, and the controller must take ports
# of its own and serve /metrics on them. No Slurm needed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${TRELLIS_BIN:?"TRELLIS_BIN, the directory of trellis-controller, is required"}
work=$(mktemp -d /tmp/trellis-e2e-controller-ports.XXXXXX)
holder=""
cleanup() {
  [ -n "${CONTROLLER_PID:-}" ] && kill "$CONTROLLER_PID" 2>/dev/null && wait "$CONTROLLER_PID"
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Holds the ports until killed; a port already taken (by a demo) is held anyway.
python3 - "$work/held" <<'PY' &
import socket, sys, time
held = []
for port in (9152, 50151, 50161):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen(1)
        held.append(s)
    except OSError:
        pass  # another process holds it: as good for this test
open(sys.argv[1], "w").write("ready\n")
time.sleep(600)
PY
holder=$!
for _ in $(seq 100); do [ -s "$work/held" ] && break; sleep 0.05; done
[ -s "$work/held" ] || fail "the port holder did not start"

# shellcheck source=bench/gpu/e2e_controller.sh
. "$repo/bench/gpu/e2e_controller.sh"
mkdir -p "$work/e2e"
start_e2e_controller "$bin" "$work/e2e" 0 || fail "controller did not start with the default ports held"
port=${TRELLIS_ADDR##*:}
metrics_port=$(cat "$work/e2e/controller.metrics-port")
for p in 9152 50151 50161; do
  [ "$port" != "$p" ] && [ "$metrics_port" != "$p" ] || fail "the controller took held port $p"
done
python3 - "$metrics_port" <<'PY' || fail "no /metrics on the controller's own port"
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
assert "trellis_build_info" in body, body[:200]
PY
echo "ok: e2e.sh's controller on gRPC port $port and /metrics port $metrics_port beside held defaults"
