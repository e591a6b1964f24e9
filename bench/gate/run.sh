#!/usr/bin/env bash
# Launch-gate decision latency at 1,536 and 6,000 nodes (registrations through
# the real gRPC path on loopback; Slurm faked). Writes
# bench/results/gate-<date>.{md,json}.
#
#   bench/gate/run.sh            # uses build/ (TRELLIS_BUILD_DIR to change)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${TRELLIS_BUILD_DIR:-$REPO/build}
ninja -C "$BUILD" gate_bench >/dev/null
day=$(date +%F)
out_md="$REPO/bench/results/gate-$day.md"
out_json="$REPO/bench/results/gate-$day.json"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
results=()
for n in 1536 6000; do
  results+=("$("$BUILD/bin/gate_bench" --nodes "$n" --repeats 5)")
done
python3 - "$out_md" "$out_json" "$day" "$(nproc)" "$cpu" "${results[@]}" <<'PY'
import json, sys
md, js, day, cores, cpu, *rows = sys.argv[1:]
rows = [json.loads(r) for r in rows]
target = 1.0
doc = {"date": day, "machine": {"cores": int(cores), "cpu": cpu},
       "command": "bench/gate/run.sh", "target_s_at_1536": target,
       "results": rows}
json.dump(doc, open(js, "w"), indent=2)
with open(md, "w") as f:
    f.write(f"# Launch-gate decision latency, {day}\n\n")
    f.write(f"Machine: {cores} cores, {cpu}. Command: `bench/gate/run.sh`.\n\n")
    f.write("Every worker of one run registers through the real gRPC path on loopback (a\n"
            "callback-API load generator in the same process, 4-socket GH200 probes); the\n"
            "controller judges each node on arrival and decides once the last one is in.\n"
            "Latency = last registration sent -> last decision received (median of 5).\n\n")
    f.write("| nodes | latency median (s) | min | max | first sent -> decided (s) | target | met |\n")
    f.write("|---|---|---|---|---|---|---|\n")
    for r in rows:
        t = f"< {target} s" if r["nodes"] == 1536 else "-"
        met = ("yes" if r["decision_latency_s_median"] < target else "no") if r["nodes"] == 1536 else "-"
        f.write(f"| {r['nodes']} | {r['decision_latency_s_median']:.3f} | {r['decision_latency_s_min']:.3f} | "
                f"{r['decision_latency_s_max']:.3f} | {r['registration_to_decision_s_median']:.3f} | {t} | {met} |\n")
print(open(md).read())
PY
