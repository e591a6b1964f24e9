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
# trainer_core compiles LibTorch's headers once, as a precompiled header;
# ccache caches the files that use it only with this sloppiness.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
start=$SECONDS
ninja -C "$BUILD"
echo "build: $((SECONDS - start)) s"
cd "$BUILD"
ctest --output-on-failure -j 2 --timeout 900 "$@"
