#!/usr/bin/env bash
# Time from kill -9 of one node's worker to the first step record of the
# relaunch inside the same Slurm job (tests/e2e/heal_worker_kill.sh), RUNS
# times on a local Slurm cluster of its own. Writes
# bench/results/heal-worker-kill-<date>.{md,json}.
#   bench/heal/worker_kill.sh [BUILD_DIR]   (RUNS=5)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$REPO/build}
RUNS=${RUNS:-5}
CLUSTER=/tmp/trellis-bench-heal
"$REPO/deploy/slurm/local-cluster" up "$CLUSTER" --nodes 4 --port-base 17500 >/dev/null
trap '"$REPO/deploy/slurm/local-cluster" down "$CLUSTER" >/dev/null' EXIT
times=()
for i in $(seq "$RUNS"); do
  out=$(TRELLIS_BIN="$BUILD/bin" TRELLIS_TEST_CLUSTER="$CLUSTER" bash "$REPO/tests/e2e/heal_worker_kill.sh")
  t=$(echo "$out" | sed -n 's/^kill_to_first_step_ms=//p')
  [ -n "$t" ] || { echo "$out"; exit 1; }
  times+=("$t")
  echo "run $i: ${t} ms"
done
date=$(date -u +%F)
python3 - "$REPO/bench/results/heal-worker-kill-$date" "$RUNS" "${times[@]}" <<'PY'
import json, platform, statistics, sys, os
base, runs, times = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3:]]
machine = "%s, %d CPUs" % (platform.processor() or platform.machine(), os.cpu_count())
doc = {"date": os.path.basename(base)[-10:], "machine": machine,
       "command": "bench/heal/worker_kill.sh (RUNS=%d)" % runs,
       "kill_to_first_step_ms": times, "median_ms": statistics.median(times),
       "max_ms": max(times), "target_ms": 30000}
json.dump(doc, open(base + ".json", "w"), indent=2)
with open(base + ".md", "w") as f:
    f.write("# Relaunch inside the allocation after kill -9 of a worker\n\n")
    f.write("Date %s; machine: %s; local Slurm cluster of 4 nodes on one host "
            "(deploy/slurm/local-cluster).\n\n" % (doc["date"], machine))
    f.write("Command: `%s`. Each run: a generic run of 2 nodes x 2 ranks + 1 spare "
            "(tests/e2e/heal_worker_kill.sh); once steps arrive, the worker of the second "
            "node is killed with SIGKILL; srun ends the launch, the controller classes it "
            "node_lost, strikes the node and relaunches on the spare in the same Slurm job.\n\n"
            % doc["command"])
    f.write("| run | kill -> first step of launch 2 (ms) |\n|---|---|\n")
    for i, t in enumerate(times, 1):
        f.write("| %d | %d |\n" % (i, t))
    f.write("\nMedian %d ms, max %d ms; target < 30,000 ms plus the ranks' start "
            "(these ranks start in well under a second).\n" % (doc["median_ms"], doc["max_ms"]))
PY
echo "wrote $REPO/bench/results/heal-worker-kill-$date.{md,json}"
