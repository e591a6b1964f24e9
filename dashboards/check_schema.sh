#!/usr/bin/env bash
# Validates dashboards against Grafana's published dashboard model
# (check_schema.mjs says how). Installs the pinned @grafana/schema and
# TypeScript once into a cache folder outside the tree:
#   $TRELLIS_DASHBOARD_TOOLS (ctest: <build>/dashboard-tools), else
#   ${XDG_CACHE_HOME:-~/.cache}/trellis/dashboard-tools
#
#   dashboards/check_schema.sh                 # every dashboards/*.json
#   dashboards/check_schema.sh FILE.json...    # these
#
# Exit 0 all match, 1 a problem (each printed as FILE:LINE: message), 77 no
# node/npm (deploy/setup.sh installs them), 2 the packages could not be
# installed (the npm registry is needed once).
set -euo pipefail

# @grafana/schema 11.0 is the model of Grafana 11.0, whose dashboards are
# schemaVersion 39 like Grafana 10.4's.
GRAFANA_SCHEMA_VERSION=11.0.7
TYPESCRIPT_VERSION=5.4.5

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (deploy/setup.sh installs nodejs, npm)"; exit 77; }
done

TOOLS=${TRELLIS_DASHBOARD_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/trellis/dashboard-tools}
TOOLS="$TOOLS/schema-$GRAFANA_SCHEMA_VERSION-ts-$TYPESCRIPT_VERSION"
mkdir -p "$(dirname "$TOOLS")"

installed() { [ -f "$TOOLS/node_modules/@grafana/schema/package.json" ] && [ -f "$TOOLS/node_modules/typescript/bin/tsc" ]; }
if ! installed; then
  # Several checks may start at once: one installs, into a fresh folder moved
  # into place whole, so nobody sees half an install.
  exec 9>"$TOOLS.lock"
  flock 9
  if ! installed; then
    tmp=$(mktemp -d "$TOOLS.tmp.XXXXXX")
    echo "check_schema: installing @grafana/schema@$GRAFANA_SCHEMA_VERSION typescript@$TYPESCRIPT_VERSION"
    if ! (cd "$tmp" && npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
        "@grafana/schema@$GRAFANA_SCHEMA_VERSION" "typescript@$TYPESCRIPT_VERSION" >npm.log 2>&1); then
      cat "$tmp/npm.log" >&2
      rm -rf "$tmp"
      echo "check_schema: npm install failed (the npm registry is needed once)" >&2
      exit 2
    fi
    rm -rf "$TOOLS"
    mv "$tmp" "$TOOLS"
  fi
  exec 9>&-
fi

if [ $# -eq 0 ]; then set -- "$HERE"/*.json; fi
exec node "$HERE/check_schema.mjs" --tools "$TOOLS" "$@"
