#!/usr/bin/env bash
# The step pipeline at scale: a real trellis-controller (its own process,
# SQLite file on local disk) and simulated workers (ingest_sim, loopback gRPC)
# streaming one record per rank per second, at 1,536 and 6,000 nodes x 4
# ranks. Slurm is replaced by the stand-in commands of fake-slurm/ (no
# machine here has 6,000 nodes; the job is "running" and nothing is run).
# Records per scale: ingest latency p50/p99 (write -> the controller's
# answer, after its commit), records lost (sent - stored in the database),
# controller CPU (cores, while streaming) and peak RSS. Writes
# bench/results/ingest-<date>.{md,json}.
#
#   bench/ingest/run.sh                  # 600 s per scale (SECONDS_PER_SCALE)
#   SCALES="1536" SECONDS_PER_SCALE=60 bench/ingest/run.sh
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${TRELLIS_BUILD_DIR:-$REPO/build}
SCALES=${SCALES:-"1536 6000"}
SECS=${SECONDS_PER_SCALE:-600}
RANKS=${RANKS:-4}
ninja -C "$BUILD" ingest_sim trellis-controller >/dev/null
WORK=$(mktemp -d /tmp/trellis-ingest-bench.XXXXXX)
ctl_pid=""
cleanup() { [ -n "$ctl_pid" ] && kill "$ctl_pid" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
day=$(date +%F)
results=()
for n in $SCALES; do
  dir="$WORK/$n"
  mkdir -p "$dir/out"
  "$BUILD/bin/trellis-controller" --db "$dir/trellis.db" --output-root "$dir/out" \
    --slurm-bin-dir "$REPO/bench/ingest/fake-slurm" --listen 127.0.0.1:0 \
    --socket "$dir/ctl/controller.sock" \
    --port-file "$dir/port" --metrics-listen 127.0.0.1:0 --metrics-port-file "$dir/mport" \
    --worker-bin /bin/true --log-level warn >"$dir/controller.log" 2>&1 &
  ctl_pid=$!
  for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
  [ -s "$dir/port" ] || { cat "$dir/controller.log"; exit 1; }
  # Controller CPU and RSS, once a second.
  python3 - "$ctl_pid" "$dir/samples.tsv" <<'PY' &
import os, sys, time
pid, out = int(sys.argv[1]), sys.argv[2]
tick = os.sysconf("SC_CLK_TCK")
with open(out, "w") as f:
    while True:
        try:
            stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS"))
        except (OSError, StopIteration):
            break
        f.write(f"{time.time():.3f}\t{(int(stat[11]) + int(stat[12])) / tick:.2f}\t{rss}\n")
        f.flush()
        time.sleep(1)
PY
  sampler=$!
  sim=$("$BUILD/bin/ingest_sim" --controller "127.0.0.1:$(cat "$dir/port")" \
    --user-addr "unix:$dir/ctl/controller.sock" --nodes "$n" \
        --ranks "$RANKS" --seconds "$SECS" 2>"$dir/sim.err") || { cat "$dir/sim.err"; exit 1; }
  ended=$(date +%s.%N)
  metrics=$(curl -sf "http://127.0.0.1:$(cat "$dir/mport")/metrics" | grep '^trellis_ingest' || true)
  kill "$ctl_pid"; wait "$ctl_pid" 2>/dev/null || true; ctl_pid=""
  kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
  run_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$sim")
  db=$(sqlite3 "$dir/trellis.db" "SELECT COALESCE(SUM(ranks),0), COUNT(*) FROM steps WHERE run_id='$run_id'")
  results+=("$(python3 - "$sim" "$db" "$dir/samples.tsv" "$ended" "$metrics" <<'PY'
import json, sys
sim = json.loads(sys.argv[1])
stored_db, rows = (int(x) for x in sys.argv[2].split("|"))
ended = float(sys.argv[4])
samples = [l.split("\t") for l in open(sys.argv[3]) if l.strip()]
samples = [(float(t), float(c), int(r)) for t, c, r in samples]
# CPU while streaming: the samples inside [end - streamed_s, end].
window = [s for s in samples if s[0] >= ended - sim["streamed_s"]]
cpu = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]) if len(window) > 1 else 0
series = {}
for line in sys.argv[5].splitlines():
    name, _, value = line.rpartition(" ")
    series[name] = float(value)
sim.update({
    "stored_records_db": stored_db, "step_rows_db": rows,
    "lost_records": sim["sent_records"] - stored_db,
    "controller_cpu_cores": round(cpu, 3),
    "controller_rss_mib_max": round(max(s[2] for s in samples) / 1024, 1),
    "controller_commit_records_mean": round(
        series.get("trellis_ingest_commit_records_sum", 0) /
        max(series.get("trellis_ingest_commit_records_count", 1), 1), 1),
    "controller_commits": int(series.get("trellis_ingest_commit_records_count", 0)),
})
print(json.dumps(sim))
PY
)")
done
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
python3 - "$REPO/bench/results/ingest-$day" "$day" "$(nproc)" "$cpu" "$SECS" "${results[@]}" <<'PY'
import json, sys
base, day, cores, cpu, secs, *rows = sys.argv[1:]
rows = [json.loads(r) for r in rows]
targets = {"latency_ms_p99": 100, "lost_records": 0, "controller_rss_mib_max": 1024}
doc = {"date": day, "machine": {"cores": int(cores), "cpu": cpu},
       "command": "bench/ingest/run.sh", "seconds_per_scale": int(secs),
       "targets_at_6000_nodes": targets, "results": rows}
json.dump(doc, open(base + ".json", "w"), indent=2)
with open(base + ".md", "w") as f:
    f.write(f"# Step pipeline at scale, {day}\n\n")
    f.write(f"Machine: {cores} cores, {cpu}. Command: `bench/ingest/run.sh` "
            f"({secs} s per scale).\n\n")
    f.write("A real `trellis-controller` (own process, SQLite on local disk, `synchronous=FULL`)\n"
            "and simulated workers (`bench/ingest/ingest_sim.cc`, loopback gRPC, one Report\n"
            "stream per node) on the same machine. Every node registers (the gate decides\n"
            "on all of them), then sends one batch per second holding one record per rank,\n"
            "phases spread over the second. Latency: a batch's write -> the controller's\n"
            "answer, which comes after its commit. Lost: records sent minus the records the\n"
            "database's step rows count. CPU: the controller's cores while streaming.\n"
            "Slurm is replaced by the stand-in commands of `bench/ingest/fake-slurm/`.\n\n")
    f.write("| nodes x ranks | records/s | p50 (ms) | p99 (ms) | max (ms) | sent | stored (db) | lost | "
            "unanswered | controller CPU (cores) | controller RSS max (MiB) | records per commit | gate (s) |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write(f"| {r['nodes']} x {r['ranks_per_node']} | {r['nodes'] * r['ranks_per_node']} | "
                f"{r['latency_ms_p50']:.1f} | {r['latency_ms_p99']:.1f} | {r['latency_ms_max']:.1f} | "
                f"{r['sent_records']} | {r['stored_records_db']} | {r['lost_records']} | "
                f"{r['unanswered_records_batches']} | {r['controller_cpu_cores']} | "
                f"{r['controller_rss_mib_max']} | {r['controller_commit_records_mean']} | {r['gate_s']:.2f} |\n")
    big = [r for r in rows if r["nodes"] == 6000]
    if big:
        r = big[0]
        ok = (r["latency_ms_p99"] < 100 and r["lost_records"] == 0 and
              r["controller_rss_mib_max"] < 1024)
        f.write(f"\nTargets at 6,000 x 4 on 2 cores: p99 < 100 ms, 0 lost, RSS < 1 GiB: "
                f"{'met' if ok else 'NOT met'}.\n")
print(open(base + ".md").read())
PY
