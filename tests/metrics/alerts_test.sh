#!/usr/bin/env bash
# The alerting rules (dashboards/alerts.yml): `promtool check rules` on them,
# `promtool check config` on dashboards/prometheus.yml (which loads them by a
# path relative to itself), and their unit tests, `promtool test rules
# dashboards/alerts_test.yml` (each alert fires on its case and stays quiet
# on the others). Exit 77 when promtool is missing (deploy/setup.sh installs
# the prometheus package), non-zero when a check fails.
set -euo pipefail

command -v promtool >/dev/null || { echo "SKIP: promtool not found (deploy/setup.sh installs prometheus)"; exit 77; }
DASHBOARDS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../dashboards" && pwd)
promtool --version 2>&1 | head -1

# From the dashboards folder, so every path resolves as it does for a site
# that uses these files where they lie.
cd "$DASHBOARDS"
failed=0
step() {
  echo "== $*"
  if "$@"; then echo "ok: $*"; else echo "FAIL: $*"; failed=1; fi
}
step promtool check rules alerts.yml
# Its only warning is the workers' discovery file, which the controller writes at run time.
step promtool check config prometheus.yml
step promtool test rules alerts_test.yml
[ $failed -eq 0 ] || exit 1
echo "PASS: alerts.yml checked and its unit tests pass"
