#!/usr/bin/env bash
# How soon a worker's unary call reaches a controller that comes back: a
# worker asks NextLaunch while nothing listens on the controller's port, the
# controller starts there DOWN_S later, and the time from its port file
# appearing to next-launch's answer is the delay (RUNS times). The answer is
# a refusal (the run does not exist): any answer means the call got through.
# With two build directories, A then B, side by side (LABEL_A, LABEL_B name
# them in the results; default: the tree of the checkout above each). Writes
# bench/results/controller-back-<date>.json.
#   bench/heal/controller_back.sh BUILD_A [BUILD_B]   (RUNS=10 DOWN_S=3)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-10}
DOWN_S=${DOWN_S:-3}
WORK=$(mktemp -d /tmp/trellis-bench-back.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
now_ms() { date +%s%3N; }

measure() {  # BIN_DIR -> one delay in ms
  local bin=$1 port d=$WORK/run
  rm -rf "$d" && mkdir -p "$d/ctl" && chmod 700 "$d/ctl"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  echo 00 >"$d/secret"
  "$bin/trellis-worker" next-launch --controller "127.0.0.1:$port" --run nobody-1 --attempt 1 \
    --launch 1 --secret-file "$d/secret" --node node1 --step-exit-code 0 --timeout 60 \
    >"$d/answer" 2>"$d/next.log" &
  local asker=$!
  sleep "$DOWN_S"
  "$bin/trellis-controller" --listen "127.0.0.1:$port" --socket "$d/ctl/controller.sock" \
    --port-file "$d/port" --db "$d/controller.db" --output-root "$d/runs" \
    --metrics-listen off >"$d/controller.log" 2>&1 &
  local controller=$!
  until [ -s "$d/port" ]; do
    kill -0 "$controller" 2>/dev/null || { cat "$d/controller.log" >&2; exit 1; }
    sleep 0.01
  done
  local up
  up=$(now_ms)
  wait "$asker"
  echo $(($(now_ms) - up))
  kill "$controller" && wait "$controller" 2>/dev/null || true
}

series() {  # BIN_DIR NAME
  local t all=()
  for i in $(seq "$RUNS"); do
    t=$(measure "$1/bin")
    all+=("$t")
    echo "$2 run $i: $t ms" >&2
  done
  echo "${all[*]}"
}

a=$(series "$1" A)
b=""
[ $# -ge 2 ] && b=$(series "$2" B)
python3 - "$REPO/bench/results/controller-back-$(date -u +%F)" "$RUNS" "$DOWN_S" \
  "${LABEL_A:-$(git -C "$1/.." rev-parse --short HEAD 2>/dev/null || echo "$1")}" "$a" \
  "${LABEL_B:-${2:+$(git -C "$2/.." rev-parse --short HEAD 2>/dev/null || echo "$2")}}" "$b" <<'PY'
import json, os, platform, statistics, sys
base, runs, down, tree_a, a, tree_b, b = sys.argv[1:8]
def stats(s):
    v = [int(x) for x in s.split()]
    return {"delays_ms": v, "median_ms": statistics.median(v), "max_ms": max(v)}
doc = {"date": os.path.basename(base)[-10:],
       "machine": "%s, %d CPUs" % (platform.processor() or platform.machine(), os.cpu_count()),
       "command": "RUNS=%s DOWN_S=%s bench/heal/controller_back.sh BUILD_A [BUILD_B]" % (runs, down),
       "down_s": int(down), "a": dict(tree=tree_a, **stats(a))}
if b:
    doc["b"] = dict(tree=tree_b, **stats(b))
json.dump(doc, open(base + ".json", "w"), indent=2)
print(json.dumps(doc, indent=2))
PY
