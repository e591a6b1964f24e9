#!/usr/bin/env bash
# dashboards/check_schema.sh must refuse a dashboard with a wrong or missing
# field: broken copies of dashboards/run-overview.json, one fault each, are
# checked together; every copy must be reported, with its fault in the message.
# Exit 77 when node/npm are missing (as check_schema.sh).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (deploy/setup.sh installs nodejs, npm)"; exit 77; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trellis-schema-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# name | what the report must contain | the fault (python, `d` the dashboard, `p` its first stat)
python3 - "$REPO/dashboards/run-overview.json" "$WORK" <<'EOF'
import copy, json, sys
src, out = sys.argv[1], sys.argv[2]
base = json.load(open(src))
faults = [
    ("missing-gridpos", "no gridPos", lambda d, p: p.pop("gridPos")),
    ("panel-type", "timeserie", lambda d, p: p.update(type="timeserie")),
    ("schema-version-string", "schemaVersion", lambda d, p: d.update(schemaVersion="39")),
    ("target-without-refid", "'refId' is missing", lambda d, p: p["targets"][0].pop("refId")),
    ("misspelt-option", "colourMode", lambda d, p: p["options"].update(colourMode=p["options"].pop("colorMode"))),
    ("fixed-datasource", "prometheus-main", lambda d, p: p["datasource"].update(uid="prometheus-main")),
    ("color-mode", "rainbow", lambda d, p: p["fieldConfig"]["defaults"]["color"].update(mode="rainbow")),
    ("gridpos-width-string", "needs integers", lambda d, p: p["gridPos"].update(w="4")),
    ("gridpos-overlap", "overlaps", lambda d, p: p["gridPos"].update(x=4)),
    ("gridpos-outside", "outside the 24-column grid", lambda d, p: p["gridPos"].update(x=22)),
    ("unknown-variable", "$cluster", lambda d, p: p["targets"][0].update(expr='up{cluster=~"$cluster"}')),
    ("no-node-variable", 'variable "node"', lambda d, p: d["templating"]["list"].pop()),
    ("editable-string", "editable", lambda d, p: d.update(editable="true")),
]
with open(f"{out}/expected", "w") as exp:
    for name, needle, fault in faults:
        d = copy.deepcopy(base)
        d["uid"] = f"broken-{name}"
        p = next(q for q in d["panels"] if q["type"] == "stat")
        fault(d, p)
        with open(f"{out}/broken-{name}.json", "w") as f:
            json.dump(d, f, indent=2)
        exp.write(f"{name}\t{needle}\n")
EOF

set +e
bash "$REPO/dashboards/check_schema.sh" "$WORK"/broken-*.json >"$WORK/report" 2>&1
rc=$?
set -e
[ $rc -eq 77 ] && { cat "$WORK/report"; exit 77; }
cat "$WORK/report"
[ $rc -eq 1 ] || { echo "FAIL: check_schema.sh exited $rc on broken dashboards, expected 1"; exit 1; }
failed=0
while IFS=$'\t' read -r name needle; do
  if grep -F "broken-$name.json:" "$WORK/report" | grep -qF -- "$needle"; then
    echo "ok: broken-$name.json refused ($needle)"
  else
    echo "FAIL: broken-$name.json: no report containing '$needle'"
    failed=1
  fi
done <"$WORK/expected"
[ $failed -eq 0 ] || exit 1
echo "PASS: every broken copy was refused"
