#!/usr/bin/env bash
# bench/gpu/e2e.sh 2 rehearsed on this machine, so that the two-GPU run of the
# production path meets no error of the script's own: a real local Slurm
# cluster of 2 nodes, each with a GPU on a char device of ours, a stand-in
# nvidia-smi that lists two GPUs, the controller, the workers and their ranks
# (on the CPU: tiny-moe), every run of the script (alone, ctas16, ctas_default,
# kill, alone2) and its summary. Checks what does not depend on a GPU: every
# controller run SUCCEEDED on both nodes through the gate, the killed rank's
# run relaunched once and resumed after its step-10 checkpoint, both ranks of
# every run reported, and the summary's table. Needs root (mknod) and Slurm;
# 77 (skipped) without them.
#
# SHARE=1: e2e.sh 2 with SHARE_ONE_GPU=1 on a machine whose nvidia-smi lists
# one GPU: both nodes on it (local-cluster --share-gpus), runs alone and
# ctas16 (the kill run is the same as without sharing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:?"BUILD_DIR, a build directory with the binaries, is required"}
share=${SHARE:-0}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (device nodes)"; exit 77; }
command -v slurmctld >/dev/null || { echo "SKIP: no slurmctld"; exit 77; }
work=$(mktemp -d /tmp/trellis-e2e-rehearsal.XXXXXX)
cluster=/tmp/trellis-ctest-gpu-e2e
runs="alone ctas16 ctas_default kill alone2" gpus=2
[ "$share" = 1 ] && runs="alone ctas16" gpus=1
cleanup() {
  "$repo/deploy/slurm/local-cluster" down "$cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/dev" "$work/bin"
for ((i = 0; i < gpus; i++)); do mknod "$work/dev/nvidia$i" c 1 3; done
cat >"$work/bin/nvidia-smi" <<EOF
#!/bin/sh
# GPUs that are not there ($gpus), for the script's host section.
case "\$*" in
  -L) for i in \$(seq 0 $((gpus - 1))); do echo "GPU \$i: Stand-in (UUID: GPU-\$i)"; done;;
  *driver_version*) echo "0.0";;
  *) for i in \$(seq 0 $((gpus - 1))); do echo "\$i, Stand-in, 00000000:0\$((i + 1)):00.0"; done;;
esac
EOF
chmod +x "$work/bin/nvidia-smi"

if ! PATH="$work/bin:$PATH" LOCAL_CLUSTER_GPU_DEVICE_DIR="$work/dev" PREFIX= \
    CLUSTER_DIR="$cluster" PORT_BASE=17600 CONTROLLER_PORT=0 \
    BASE_SPEC=examples/tiny-moe.toml SKIP_BUILD=1 BUILD_DIR="$build" STEPS=20 WARMUP=5 \
    KILL_STEPS=40 OUT_DIR="$work/out" WORK="$work/w" RUNS="$runs" SHARE_ONE_GPU=$share \
    bash "$repo/bench/gpu/e2e.sh" 2 >"$work/log" 2>&1; then
  tail -60 "$work/log"
  echo "FAIL: e2e.sh exited non-zero"
  exit 1
fi
if grep -q "No such file" "$work/log"; then
  grep "No such file" "$work/log"
  echo "FAIL: the script printed an error"
  exit 1
fi
want_name=gpu-e2e-20; [ "$share" = 1 ] && want_name=gpu-e2e-2nodes-1gpu-20
ls "$work"/out/$want_name*.json >/dev/null 2>&1 || { ls "$work/out"; echo "FAIL: no $want_name*.json"; exit 1; }
python3 - "$work"/out/$want_name*.json "$runs" "$gpus" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
names, gpus = sys.argv[2].split(), int(sys.argv[3])
runs, bad = doc["runs"], []
if doc["ngpu"] != 2 or doc["gpus"] != gpus or doc["nodes_share_gpus"] != (gpus < 2):
    bad.append(f"ngpu {doc['ngpu']} gpus {doc['gpus']} shared {doc['nodes_share_gpus']}, expected 2, {gpus}")
for name in names:
    r = runs.get(name)
    if r is None:
        bad.append(f"{name}: no run in the summary")
        continue
    if not r.get("tokens_per_s_per_gpu", 0) > 0:
        bad.append(f"{name}: no tokens/s")
    if len(r.get("devices", [])) != 2:
        bad.append(f"{name}: {len(r.get('devices', []))} start-up lines, expected 2")
    if name.startswith("alone"):
        continue
    if r.get("state") != "SUCCEEDED":
        bad.append(f"{name}: ended {r.get('state')}")
    if sorted(k["node"] for k in r.get("ranks", [])) != ["node1", "node2"]:
        bad.append(f"{name}: ranks on {[k.get('node') for k in r.get('ranks', [])]}")
    gates = r.get("gate", {}).get("gates", [])
    if not gates or any(g["decision"] != "GO" for g in gates):
        bad.append(f"{name}: gate decisions {[g['decision'] for g in gates]}")
kill = runs.get("kill", {}) if "kill" in names else None
if kill is not None:
    classes = [l["failure_class"] for l in kill.get("launches", [])]
    if classes != ["signal", "succeeded"]:
        bad.append(f"kill: launches {classes}, expected a signal then a success")
    # Killed right after the step-10 checkpoint; a slow machine may get past the
    # next one (every 10 steps) first.
    resumed = kill.get("resumed_first_step")
    if resumed not in (11, 21):
        bad.append(f"kill: first step after the relaunch {resumed}, expected 11 (resumed from the "
                   "step-10 checkpoint) or 21")
    if kill.get("last_step") != 40:
        bad.append(f"kill: last step {kill.get('last_step')}, expected 40")
    reads = kill.get("checkpoint_reads", [])
    if [x.split(":")[0] for x in reads] != ["rank-0", "rank-1"] or \
            not all(f"checkpoint step {(resumed or 1) - 1} read in" in x for x in reads):
        bad.append(f"kill: the ranks' checkpoint reads after the relaunch: {reads}")
    writes = [w for w in kill.get("checkpoint_writes", [])
              if w.startswith("attempt-1/launch-1 ") and "checkpoint step 10 written in" in w]
    if len(writes) != 2:
        bad.append(f"kill: the first launch's two ranks' step-10 checkpoint writes: {writes}")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
PY
md=$(ls "$work"/out/gpu-e2e-*.md)
wants=("## Throughput: through the controller vs trellis-train alone"
  "| ctas16 | controller + workers (NCCL_MAX_CTAS=16)" "## The gate's report of this host")
if [ "$share" = 1 ]; then
  wants+=("# The production path on 2 nodes sharing 1 GPU" "tokens/s per rank" "socket transport")
else
  wants+=("rank killed at")
fi
for want in "${wants[@]}"; do
  grep -qF "$want" "$md" || { echo "FAIL: the summary lacks '$want'"; exit 1; }
done
if [ "$share" = 1 ]; then
  # Both nodes' GRES on the one device.
  [ "$(grep -c "File=$work/dev/nvidia0\$" "$work/w/gres.conf")" = 2 ] ||
    { cat "$work/w/gres.conf"; echo "FAIL: the nodes do not share the GPU"; exit 1; }
  echo "ok: bench/gpu/e2e.sh 2 with SHARE_ONE_GPU=1 rehearsed: both nodes on one GPU, ctas16 SUCCEEDED"
else
  echo "ok: bench/gpu/e2e.sh 2 rehearsed: 3 controller runs SUCCEEDED on 2 nodes, the killed run resumed"
fi
