#!/usr/bin/env bash
# Checkpoint write and read times on one rank's state of a model
# (bench/checkpoint/checkpoint_io.cc): save, read back from the page cache,
# read back from the disk (pages dropped), each load checked equal to what was
# saved. Optionally the same with a second build (BASE_BUILD_DIR, say of an
# older commit) for a side-by-side table.
# Usage: bench/checkpoint/run.sh
#   env: BUILD_DIR=build, BASE_BUILD_DIR= (none), BASE_LABEL= (what the base build is),
#        SPEC=examples/moe-bench.toml, LAYERS=2,
#        DEVICES="cpu" (cuda and/or cpu), REPEATS=3, DIR=<a temp dir: the disk measured>,
#        OUT=bench/results, NAME=checkpoint-io-<date>, MACHINE=<words for the table>
# Writes OUT/NAME.json (every repeat) and OUT/NAME.md (medians, bench/checkpoint/table.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BASE_BUILD_DIR=${BASE_BUILD_DIR:-}
SPEC=${SPEC:-examples/moe-bench.toml}
LAYERS=${LAYERS:-2}
DEVICES=${DEVICES:-cpu}
REPEATS=${REPEATS:-3}
OUT=${OUT:-bench/results}
NAME=${NAME:-checkpoint-io-$(date -u +%F)}
MACHINE=${MACHINE:-$(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB memory}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DIR=${DIR:-$work/ckpt}
builds=(this "$BUILD_DIR")
[ -n "$BASE_BUILD_DIR" ] && builds=(base "$BASE_BUILD_DIR" "${builds[@]}")
for ((i = 1; i < ${#builds[@]}; i += 2)); do
  [ -x "${builds[i]}/bin/checkpoint_io" ] ||
    { echo "missing ${builds[i]}/bin/checkpoint_io: build it (ninja -C ${builds[i]} checkpoint_io)" >&2
      exit 2; }
done
: > "$work/runs.jsonl"
for ((i = 0; i < ${#builds[@]}; i += 2)); do
  for device in $DEVICES; do
    echo "== ${builds[i]} on $device" >&2
    "${builds[i + 1]}/bin/checkpoint_io" "$SPEC" --layers "$LAYERS" --device "$device" \
      --repeats "$REPEATS" --dir "$DIR" | sed "s/^{/{\"build\":\"${builds[i]}\",/" >> "$work/runs.jsonl"
  done
done
mkdir -p "$OUT"
command="SPEC=$SPEC LAYERS=$LAYERS DEVICES=\"$DEVICES\" REPEATS=$REPEATS"
[ -n "$BASE_BUILD_DIR" ] && command+=" BASE_BUILD_DIR=<a build of ${BASE_LABEL:-the base}>"
command+=" bench/checkpoint/run.sh"
python3 bench/checkpoint/table.py "$work/runs.jsonl" "$OUT/$NAME.json" "$command" "$MACHINE" \
  > "$OUT/$NAME.md"
cat "$OUT/$NAME.md"
