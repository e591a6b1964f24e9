#!/usr/bin/env bash
# The dashboards against a real Prometheus fed by a real run on the local
# cluster. Prometheus runs with dashboards/prometheus.yml (its controller
# target and service-discovery file pointed at this test's controller, 1 s
# scrapes). The run, 2 nodes x 2 ranks + 1 spare pinned to node[1-3], causes
# what the panels show:
#   - node3 starts short of memory (fixture gh200-short): the gate leaves it
#     out (GO on node1, node2), strikes and quarantines it;
#   - rank 1 of launch 1 exits 3 after 5 steps: one restart (class rank_exit),
#     a relaunch inside the allocation on node1, node2, gated again (a second
#     GO, whose figures replace the first gate's: node3's are checked over
#     the time they were there);
#   - rank 2 is 3x slower: a straggler event;
#   - the ranks report every optional field of the step record (rank.py) and
#     stay alive after their last step until the checks are done.
# Then every panel and variable query of dashboards/*.json must return data
# (check_dashboards.py), figures must match (last step, the fixtures' socket
# bytes, restarts, relaunches, strikes, quarantine, gate decisions, straggler
# events), every exported family must be on a panel or in dashboards/README.md,
# and `promtool check metrics` must pass on the controller's and a worker's
# /metrics.
# shellcheck source-path=SCRIPTDIR source=../e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STEPS=30

for tool in prometheus promtool curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (deploy/setup.sh installs it)"; exit 77; }
done

use_clean_cluster
PROM_PID=""
stop_prometheus() { [ -z "$PROM_PID" ] || { kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; } || true; }
trap 'stop_prometheus; "$CLUSTER_CTL" reset "$TRELLIS_TEST_CLUSTER" >/dev/null; cleanup' EXIT
"$CLUSTER_CTL" fixture "$TRELLIS_TEST_CLUSTER" node3 gh200-short >/dev/null

T0=$(date +%s)
start_controller
metrics=$(grep -o 'metrics on http://[0-9.:]*/metrics' "$E2E_DIR/controller.log" | tail -1 | cut -d/ -f3)
[ -n "$metrics" ] || fail "the controller's log names no metrics address"
log "controller metrics on $metrics"

# Prometheus with the shipped config, pointed at this controller.
sed -e "s/127.0.0.1:9152/$metrics/" -e "s|\"trellis-targets.json\"|\"$E2E_DIR/targets.json\"|" \
  -e 's/scrape_interval: 15s/scrape_interval: 1s/' -e 's/scrape_timeout: 10s/scrape_timeout: 1s/' \
  -e 's/refresh_interval: 30s/refresh_interval: 1s/' \
  "$REPO/dashboards/prometheus.yml" >"$E2E_DIR/prometheus.yml"
cp "$REPO/dashboards/alerts.yml" "$E2E_DIR/alerts.yml"  # its rule_files, beside it
promtool check config "$E2E_DIR/prometheus.yml" >/dev/null || fail "promtool check config: $E2E_DIR/prometheus.yml"
for try in 1 2 3; do  # a free port, unless someone takes it first
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  prometheus --config.file="$E2E_DIR/prometheus.yml" --storage.tsdb.path="$E2E_DIR/tsdb" \
    --web.listen-address="127.0.0.1:$port" --log.level=warn >>"$E2E_DIR/prometheus.log" 2>&1 &
  PROM_PID=$!
  PROM="http://127.0.0.1:$port"
  deadline=$((SECONDS + 30))
  until curl -sf "$PROM/-/ready" >/dev/null; do
    kill -0 "$PROM_PID" 2>/dev/null || break
    [ $SECONDS -lt $deadline ] || fail "Prometheus not ready within 30 s"
    sleep 0.2
  done
  kill -0 "$PROM_PID" 2>/dev/null && break
  PROM_PID=""
  [ $try -lt 3 ] || { cat "$E2E_DIR/prometheus.log" >&2; fail "Prometheus did not start"; }
done
log "Prometheus on $PROM"

instant() {  # EXPR -> the value of its only series ("" when none)
  curl -sf --get "$PROM/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if len(r)==1 else "")'
}
wait_prom() {  # EXPR VALUE TIMEOUT_S: until EXPR's only series equals VALUE
  local deadline=$((SECONDS + $3)) v=""
  while [ $SECONDS -lt $deadline ]; do
    v=$(instant "$1")
    [ "$v" = "$2" ] && return 0
    sleep 0.5
  done
  fail "$1 is '$v' after $3 s, expected $2"
}

spec=$(write_spec dash "exec python3 $HERE/rank.py" 'spare_nodes = 1' 'nodelist = "node[1-3]"' \
  '[gate]' 'min_free_gib_per_socket = 100.0' 'timeout_s = 60' \
  '[restart]' 'max_restarts = 1' \
  '[health]' 'straggler_window = 6' 'straggler_min_slow = 4' \
  '[env]' "STEPS = \"$STEPS\"" 'STEP_S = "0.2"' 'SLOW_RANK = "2"' 'SLOW_FACTOR = "3"' \
  'FAIL_RANK = "1"' 'FAIL_LAUNCH = "1"' 'FAIL_AFTER = "5"' "HOLD_FILE = \"$E2E_DIR/release\"")
# Counters must be seen at 0 before the events, or increase() misses them.
wait_prom 'up{job="trellis-controller"}' 1 30
id=$(trellis submit "$spec") || fail "submit failed"
log "submitted $id"

# Launch 2 done: every rank reported step $STEPS (they now hold), and
# Prometheus has scraped it from the controller and from all four ranks.
deadline=$((SECONDS + 150))
until [ "$(sqlite3 "$E2E_DIR/controller.db" \
  "SELECT ranks FROM steps WHERE run_id='$id' AND launch=2 AND step=$STEPS" 2>/dev/null)" = 4 ]; do
  state=$(run_state "$id")
  case "$state" in SUCCEEDED|FAILED|CANCELLED) trellis show "$id" >&2; fail "run $id ended $state" ;; esac
  [ $SECONDS -lt $deadline ] || { trellis show "$id" >&2; fail "launch 2 did not report step $STEPS"; }
  sleep 0.5
done
log "launch 2 reported step $STEPS on every rank"
wait_prom "trellis_run_last_step{run=\"$id\"}" "$STEPS" 20
wait_prom "count(trellis_rank_last_step{run=\"$id\"} == $STEPS)" 4 20
sleep 3  # a few more 1 s scrapes of the final figures for the rate windows (5 s)

# The live /metrics of the controller and of one worker.
curl -sf "http://$metrics/metrics" >"$E2E_DIR/controller.prom" || fail "GET controller /metrics"
worker=$(json_get "$E2E_DIR/targets.json" "d[0]['targets'][0]")
curl -sf "http://$worker/metrics" >"$E2E_DIR/worker.prom" || fail "GET worker /metrics at $worker"
for f in controller worker; do
  promtool check metrics <"$E2E_DIR/$f.prom" || fail "promtool check metrics: the $f's /metrics"
  log "promtool check metrics: the $f's /metrics passes"
done

# The figures the fixtures and the run fix.
kib() {  # FIXTURE FIELD -> its value in bytes (node0)
  awk -v f="$2:" '$3 == f { printf "%.0f\n", $4 * 1024 }' "$REPO/deploy/slurm/fixtures/$1/devices/system/node/node0/meminfo"
}
unattributed() {  # FIXTURE -> MemTotal - MemFree - attributed, in bytes
  echo $(( $(kib "$1" MemTotal) - $(kib "$1" MemFree) - $(kib "$1" FilePages) - $(kib "$1" AnonPages) \
    - $(kib "$1" Slab) - $(kib "$1" KernelStack) - $(kib "$1" PageTables) ))
}
end=$(date +%s)
H='trellis-host-memory|Free memory per socket|A'
U='trellis-host-memory|Unattributed memory per socket|A'
R='trellis-run-overview|Restarts in range'
python3 "$HERE/check_dashboards.py" --prom "$PROM" --dashboards "$REPO/dashboards" \
  --readme "$REPO/dashboards/README.md" --run "$id" --start "$T0" --end "$end" \
  --exposition "$E2E_DIR/controller.prom" --exposition "$E2E_DIR/worker.prom" \
  --expect "trellis-run-overview|Last step|A||$STEPS" \
  --expect-seen "$H|node=node3,socket=0|$(kib gh200-short MemFree)" \
  --expect "$H|node=node1,socket=0|$(kib gh200-healthy MemFree)" \
  --expect-seen "$U|node=node3,socket=0|$(unattributed gh200-short)" \
  --expect "$U|node=node2,socket=0|$(unattributed gh200-healthy)" \
  --expect "$R|A||1" --expect "$R|B||1" --expect "$R|C||1" \
  --expect "trellis-fleet|Strikes per node|A|node=node3|1" \
  --expect "trellis-fleet|Quarantined nodes|A||1" \
  --expect "trellis-host-memory|Gate decisions in range|A|decision=GO|2" \
  --expect "trellis-host-memory|Gate decisions in range|A|decision=ABORT|0" \
  --expect "trellis-run-overview|Straggler events|A||1" \
  --expect "trellis-run-overview|Steps at risk|A||$((STEPS - STEPS / 10 * 10))" \
  --expect "trellis-allocator-nccl|NCCL CTAs|A||16" \
  --expect "trellis-run-overview|Expert load|A||$(awk -v s="$STEPS" 'BEGIN { print 1 + s / 100 }')" \
  --expect "trellis-run-overview|Expert load|B||$(awk -v s="$STEPS" 'BEGIN { print 1.5 + s / 100 }')" \
  >"$E2E_DIR/check.txt" 2>&1 || { cat "$E2E_DIR/check.txt"; fail "the dashboards' queries (above)"; }
cat "$E2E_DIR/check.txt"

# The run's own record agrees with what Prometheus saw.
show=$(run_json "$id")
[ "$(json_get "$show" "[l['failure_class'] for l in d['launches']][:1]")" = "['rank_exit']" ] ||
  fail "launch 1 did not end rank_exit: $(json_get "$show" "d['launches']")"
[ "$(json_get "$show" "sorted({e['rank'] for e in d['health_events'] if e['kind']=='straggler'})")" = "[2]" ] ||
  fail "straggler events: $(json_get "$show" "d['health_events']")"

touch "$E2E_DIR/release"
wait_state "$id" SUCCEEDED 60
log "PASS: $(grep -c '^ok' "$E2E_DIR/check.txt") checks of dashboards/*.json against Prometheus"

# The series count the README states, from the live families.
counts=$(python3 "$HERE/series_count.py" --controller "$E2E_DIR/controller.prom" \
  --worker "$E2E_DIR/worker.prom" --readme "$REPO/README.md" 2>&1) || fail "series count: $counts"
log "series at 1,536 GPUs: $counts"
