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
# As many busy tests at once as cores (TRELLIS_TEST_JOBS sets another count), each taking
# a core of the resource spec (RESOURCE_GROUPS cores:1, CMakeLists.txt); one more slot for a
# test that mostly waits and takes none (tests/CMakeLists.txt). A third busy test on 2 cores
# made a restart test's blame race (bench/results/build-time-2026-12-06.md).
jobs=${TRELLIS_TEST_JOBS:-$(nproc)}
printf '{"version": {"major": 1, "minor": 0}, "local": [{"cores": [{"id": "0", "slots": %d}]}]}\n' \
  "$jobs" >test-cores.json
start=$SECONDS
status=0
rm -f Testing/Temporary/LastTestsFailed.log  # ctest keeps an old one when all pass
ctest --output-on-failure -j "$((jobs + 1))" --resource-spec-file test-cores.json --timeout 900 \
  "$@" || status=$?
echo "tests: $((SECONDS - start)) s"
if [ "$status" != 0 ] && [ -s Testing/Temporary/LastTestsFailed.log ]; then
  # A failure's output scrolled past among a thousand tests: print each failed
  # test's last lines again, so the end of the log says why.
  while IFS=: read -r _ name; do
    echo "=== output of failed test $name (last 60 lines) ==="
    awk -v t="Testing: $name" '
      index($0, t) && substr($0, index($0, t) + length(t)) == "" { inside = 1; next }
      inside && /^<end of output>$/ { exit }
      inside' Testing/Temporary/LastTest.log | tail -n 60
  done < Testing/Temporary/LastTestsFailed.log
fi
exit "$status"
