#!/usr/bin/env bash
# `trellis report` end to end: a short [model] run (2 nodes x 2 ranks, 12
# steps) to SUCCEEDED, its page written by the CLI and opened in headless
# Chromium: no console message at all (the page has no script, so any is a
# script error or a blocked load), one <svg> per chart, the loss line with a
# point per stored step. The screenshot is kept as an artifact; its path is
# printed. Also: an unknown run exits 3, a missing directory 2.
. "$(dirname "$0")/../e2e/lib.sh"
STEPS=12

[ -x "$TRELLIS_BIN/trellis-corpus" ] || { echo "SKIP: built without trainer_core"; exit 77; }
command -v chromium >/dev/null ||
  { echo "SKIP: chromium is not installed (deploy/setup.sh installs it)"; exit 77; }
ARTIFACTS=${TRELLIS_TEST_ARTIFACTS:-$TRELLIS_BIN/../tests/artifacts}
mkdir -p "$ARTIFACTS"

spec=$(tiny_moe_spec -e "s/^steps = .*/steps = $STEPS/" \
  -e 's/^warmup_steps = .*/warmup_steps = 2/' -e 's/^every_steps = .*/every_steps = 6/') ||
  fail "tiny-moe spec not written"

start_controller
id=$(trellis submit "$spec") || fail "submit failed"
log "submitted $id"
wait_state "$id" SUCCEEDED 180

# The CLI's contract first: exit codes, nothing written on refusal.
set +e
trellis report nope-99 --html "$E2E_DIR/nope.html" 2>"$E2E_DIR/nope.err"
rc=$?
trellis report "$id" --html "$E2E_DIR/no/such/dir/r.html" 2>"$E2E_DIR/nodir.err"
rc_dir=$?
set -e
[ "$rc" = 3 ] || fail "unknown run: exit $rc, expected 3 ($(cat "$E2E_DIR/nope.err"))"
grep -q "nope-99" "$E2E_DIR/nope.err" || fail "unknown run not named: $(cat "$E2E_DIR/nope.err")"
[ ! -e "$E2E_DIR/nope.html" ] || fail "a page was written for an unknown run"
[ "$rc_dir" = 2 ] || fail "missing directory: exit $rc_dir, expected 2"

page="$E2E_DIR/report.html"
trellis report "$id" --html "$page" || fail "trellis report failed"
if grep -Eo 'https?://[^" ]*' "$page" >"$E2E_DIR/urls.txt"; then
  fail "the page refers to the network: $(head -3 "$E2E_DIR/urls.txt")"
fi
stored=$(sqlite3 "$E2E_DIR/controller.db" "SELECT COUNT(*) FROM steps WHERE run_id='$id'")
[ "$stored" -ge "$STEPS" ] || fail "$stored step rows stored, expected at least $STEPS"

# Chromium prints much to stderr (D-Bus, GPU, sandbox warnings): only its
# console lines and uncaught errors are the page's.
chromium_run() {  # NAME ARGS...: stdout to $E2E_DIR/NAME.out, stderr to NAME.err
  local name=$1
  shift
  timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-dev-shm-usage --user-data-dir="$E2E_DIR/chromium-profile" \
    --enable-logging=stderr --v=0 "$@" "file://$page" \
    >"$E2E_DIR/$name.out" 2>"$E2E_DIR/$name.err" ||
    fail "chromium ($name) failed: $(tail -5 "$E2E_DIR/$name.err")"
}
shot="$ARTIFACTS/report.png"
rm -f "$shot"
chromium_run dom --dump-dom
chromium_run shot --screenshot="$shot" --window-size=1280,2400
for name in dom shot; do
  if grep -E ':CONSOLE[:(]|Uncaught' "$E2E_DIR/$name.err" >"$E2E_DIR/console.txt"; then
    fail "the page logged to the console ($name): $(cut -c1-300 "$E2E_DIR/console.txt")"
  fi
done
[ -s "$shot" ] || fail "no screenshot at $shot"

# The rendered DOM: a chart per section, the loss line a point per stored step.
python3 - "$E2E_DIR/dom.out" "$stored" <<'EOF' || fail "the rendered page lacks what it should have"
import re, sys
from html.parser import HTMLParser

dom, stored = open(sys.argv[1]).read(), int(sys.argv[2])

class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs, self.paths, self.rows, self.scripts = [], {}, 0, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svgs.append(a.get("id", ""))
        elif tag == "path" and "series" in a.get("class", ""):
            self.paths.setdefault(a["class"].split()[1], a)
        elif tag == "tr":
            self.rows += 1
        elif tag == "script":
            self.scripts += 1

c = Charts()
c.feed(dom)
want = ["chart-loss", "chart-tokens", "chart-phases", "chart-load", "chart-grad-norm", "chart-lr",
        "chart-ranks", "chart-gate"]
problems = []
if c.svgs != want:
    problems.append(f"charts {c.svgs}, expected {want}")
loss = c.paths.get("loss")
if loss is None:
    problems.append("no loss line")
else:
    points = len(re.findall(r"[ML]", loss["d"]))
    if points != stored or loss.get("data-points") != str(stored):
        problems.append(f"loss line has {points} points (data-points {loss.get('data-points')}), "
                        f"expected {stored}")
# tiny-moe on 2 nodes x 2 ranks: EP 2, so both routing lines.
for phase in ("phase-step", "phase-fwd", "phase-bwd", "phase-optim", "tokens", "load-experts",
              "load-ep"):
    if phase not in c.paths:
        problems.append(f"no {phase} line")
if c.scripts:
    problems.append(f"{c.scripts} <script> elements")
if c.rows < 5:
    problems.append(f"only {c.rows} table rows (events, gates)")
if "no steps recorded" in dom:
    problems.append("says no steps recorded")
for p in problems:
    print("  " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

log "PASS: $id's report ($stored steps) rendered without console messages; screenshot: $shot"
