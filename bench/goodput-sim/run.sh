#!/usr/bin/env bash
# Goodput of a 54-day failure trace (2,048 nodes x 8 GPUs, 419 interruptions)
# under the controller's own decision code, per strategy and seed. Writes
# bench/results/goodput-sim-<date>.{md,json}.
#
#   bench/goodput-sim/run.sh                       # uses build/ (TRELLIS_BUILD_DIR to change)
#   GOODPUT_SIM_SEEDS="1 2" bench/goodput-sim/run.sh
#   TRELLIS_BUILD_LOCK=FILE bench/goodput-sim/run.sh  # build under flock FILE (a shared build dir)
#   GOODPUT_SIM_BEFORE=REV:PATH bench/goodput-sim/run.sh  # the findings compare with the results
#                                  # PATH held at git revision REV (earlier code, same scenario)
#   GOODPUT_SIM_NAME=goodput-sim-2026-12-07b bench/goodput-sim/run.sh  # another file of the day
#   GOODPUT_SIM_DATE=2026-12-07 GOODPUT_SIM_MACHINE="a 2-core VM" ...  # the date, the machine
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${TRELLIS_BUILD_DIR:-$REPO/build}
SEEDS=${GOODPUT_SIM_SEEDS:-1 2 3 4 5}
build=(ninja -C "$BUILD" goodput_sim)
if [[ -n "${TRELLIS_BUILD_LOCK:-}" ]]; then build=(flock "$TRELLIS_BUILD_LOCK" "${build[@]}"); fi
"${build[@]}" >/dev/null

day=${GOODPUT_SIM_DATE:-$(date -u +%F)}
name=${GOODPUT_SIM_NAME:-goodput-sim-$day}
out_md="$REPO/bench/results/$name.md"
out_json="$REPO/bench/results/$name.json"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
raw=$(mktemp)
before=$(mktemp)
trap 'rm -f "$raw" "$before"' EXIT
# Read before the run: PATH may be the file this run overwrites.
before_args=()
if [[ -n "${GOODPUT_SIM_BEFORE:-}" ]]; then
  git -C "$REPO" show "$GOODPUT_SIM_BEFORE" >"$before"
  before_args=(--before "$before" --before-name "$GOODPUT_SIM_BEFORE")
fi
start=$(date +%s)
# shellcheck disable=SC2086  # the seeds are separate arguments
"$BUILD/bin/goodput_sim" --seeds $SEEDS >"$raw"
wall=$(($(date +%s) - start))
cmd="bench/goodput-sim/run.sh"
[[ -n "${GOODPUT_SIM_SEEDS:-}" ]] && cmd="GOODPUT_SIM_SEEDS=\"$SEEDS\" $cmd"
[[ -n "${GOODPUT_SIM_BEFORE:-}" ]] && cmd="GOODPUT_SIM_BEFORE=$GOODPUT_SIM_BEFORE $cmd"
[[ -n "${GOODPUT_SIM_NAME:-}" ]] && cmd="GOODPUT_SIM_NAME=$GOODPUT_SIM_NAME $cmd"
[[ -n "${GOODPUT_SIM_DATE:-}" ]] && cmd="GOODPUT_SIM_DATE=$GOODPUT_SIM_DATE $cmd"
machine_args=()
if [[ -n "${GOODPUT_SIM_MACHINE:-}" ]]; then machine_args=(--machine "$GOODPUT_SIM_MACHINE"); fi
python3 "$REPO/bench/goodput-sim/report.py" --raw "$raw" --md "$out_md" --json "$out_json" \
  --date "$day" --cores "$(nproc)" --cpu "$cpu" --command "$cmd" --wall-s "$wall" \
  "${before_args[@]}" "${machine_args[@]}"
cat "$out_md"
