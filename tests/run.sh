#!/usr/bin/env bash
# The README's second command: installs the packages, builds everything once,
# and runs the whole test suite (unit tests, the real local Slurm cluster
# tests, and the README demo end to end).
#
#   tests/run.sh                 # everything
#   tests/run.sh -L unit         # extra arguments go to ctest
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TRELLIS_BUILD_DIR:-$REPO/build}

bash "$REPO/deploy/setup.sh"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/trellis-ccache}
cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
start=$SECONDS
ninja -C "$BUILD"
echo "build: $((SECONDS - start)) s"
cd "$BUILD"
ctest --output-on-failure -j 2 --timeout 900 "$@"
