#!/usr/bin/env bash
# Checks `deploy/slurm/local-cluster up DIR --queue-wait MEDIAN_S`: on a
# 2-node cluster of its own (median 10 s, sigma 0.5, seed 11), each job waits
# about its draw and no less:
#   1. a job submitted now is pending until now + its draw (the wait logged in
#      DIR/log/queue-wait.log and kept in its AdminComment), then starts;
#   2. a job submitted with --begin=now+120 and released at once with
#      `scontrol update StartTime=now` (as the controller releases a job
#      queued ahead) waits its whole draw from the release;
#   3. a job already eligible, released with StartTime=now partway through
#      its wait, keeps its begin time (it waits the rest of its draw);
#   4. the draws are the documented sequence: the k-th job of seed S gets the
#      k-th lognormal draw of S's stream (recomputed here), and 2000 draws of
#      the stream have about the median and sigma asked for, each independent
#      of the one before (lag-1 correlation of their logs under 0.1).
# A job "starts" when squeue first shows it RUNNING (polled every 0.25 s):
# it must not run before its begin time, and must run within 5 s after it.
# About 40 s; needs root (the local cluster does). Exit 0: passed, 1: failed,
# 77: skipped (not root, or no job_submit_lua.so).
#   bench/goodput-e2e/queue_wait_test.sh        (QUEUE_WAIT_TEST_PORT_BASE, default 18200)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../../deploy/slurm/local-cluster
PORT_BASE=${QUEUE_WAIT_TEST_PORT_BASE:-18200}
MEDIAN=10
SIGMA=0.5
SEED=11

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (the local cluster does)"; exit 77; }
have_lua=0
for f in /usr/lib/*-linux-gnu/slurm-wlm/job_submit_lua.so /usr/lib64/slurm/job_submit_lua.so; do
  [ -f "$f" ] && have_lua=1
done
[ $have_lua = 1 ] || { echo "SKIP: Slurm's job_submit_lua.so is not installed"; exit 77; }

DIR=$(mktemp -d /tmp/qwt.XXXXXX)
cleanup() {
  "$CLUSTER" down "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- queue-wait.log ---" >&2
  cat "$DIR/log/queue-wait.log" >&2 2>/dev/null || true
  squeue -o '%i %j %T %r %S' >&2 2>/dev/null || true
  exit 1
}
log() { echo "[$(date +%H:%M:%S)] $*"; }

"$CLUSTER" up "$DIR" --nodes 2 --port-base "$PORT_BASE" --queue-wait "$MEDIAN" \
  --queue-wait-sigma "$SIGMA" --queue-wait-seed "$SEED" >/dev/null
# shellcheck disable=SC1091
. "$DIR/env"
grep -qx 'JobSubmitPlugins=lua' "$DIR/etc/slurm.conf" || fail "slurm.conf has no JobSubmitPlugins=lua"

# The draw logged for job number K (0-based, in submission order).
draw_of() { sed -n "s/.* submit draw=$1 .* wait_s=\([0-9]*\) .*/\1/p" "$DIR/log/queue-wait.log"; }
begin_of() { sed -n "s/.* submit draw=$1 .* begin=\([0-9]*\)$/\1/p" "$DIR/log/queue-wait.log"; }
comment_of() { scontrol show job "$1" -o | grep -o 'AdminComment=queue_wait_s=[0-9]*' | cut -d= -f3; }
eligible_of() {  # JOB: EligibleTime as unix seconds
  date -d "$(scontrol show job "$1" -o | grep -o 'EligibleTime=[^ ]*' | cut -d= -f2)" +%s
}

# Polls until every job given has been seen RUNNING; prints "JOB START_S" lines.
watch_starts() {
  local -A started=()
  local deadline=$((SECONDS + 90)) j st now
  while [ ${#started[@]} -lt $# ]; do
    [ $SECONDS -lt $deadline ] || fail "jobs $* not all started within 90 s"
    now=$(date +%s.%N)
    for j in "$@"; do
      [ -n "${started[$j]:-}" ] && continue
      st=$(squeue -h -j "$j" -o %T 2>/dev/null || true)
      case "$st" in RUNNING|COMPLETING|COMPLETED|"") started[$j]=$now; echo "$j $now" ;; esac
    done
    sleep 0.25
  done
}

# 1 and 3: two jobs submitted now; 2: one asked to begin in 120 s.
t_submit=$(date +%s)
j1=$(sbatch --parsable -N 1 --output=/dev/null --wrap 'sleep 2')
j2=$(sbatch --parsable -N 1 --output=/dev/null --begin=now+120 --wrap 'sleep 2')
j3=$(sbatch --parsable -N 1 --output=/dev/null --wrap 'sleep 2')
w1=$(draw_of 0) w2=$(draw_of 1) w3=$(draw_of 2)
if [ -z "$w1" ] || [ -z "$w2" ] || [ -z "$w3" ]; then fail "no draws logged for the three jobs"; fi
log "draws: job $j1 $w1 s, job $j2 $w2 s, job $j3 $w3 s"
[ "$(comment_of "$j1")" = "$w1" ] || fail "job $j1's AdminComment does not carry its draw $w1"
[ "$(squeue -h -j "$j1" -o %r)" = BeginTime ] || fail "job $j1 is not pending on BeginTime"
b1=$(eligible_of "$j1")
[ "$b1" = "$(begin_of 0)" ] || fail "job $j1's EligibleTime $b1 is not its logged begin $(begin_of 0)"
within_1s() { [ "$1" -ge -1 ] && [ "$1" -le 1 ]; }
within_1s $((b1 - t_submit - w1)) || fail "job $j1 begins at $b1, not its submission $t_submit + its draw $w1"
e2=$(eligible_of "$j2")
[ $((e2 - t_submit)) -ge $((120 + w2 - 1)) ] || fail "job $j2 (--begin=now+120) begins $((e2 - t_submit)) s after submission, before 120 + $w2"

# Released: j2 at once (not yet eligible: its whole draw from now); j3 after
# 2 s (eligible since its submission: its begin stays).
t_release=$(date +%s)
scontrol update JobId="$j2" StartTime=now
sleep 2
scontrol update JobId="$j3" StartTime=now
b3=$(eligible_of "$j3")
[ "$b3" = "$(begin_of 2)" ] || fail "job $j3's begin moved from $(begin_of 2) to $b3 on StartTime=now"
e2=$(eligible_of "$j2")
within_1s $((e2 - t_release - w2)) ||
  fail "job $j2 released at $t_release begins at $e2, not the release + its draw $w2"
grep -q "modify job=$j2 " "$DIR/log/queue-wait.log" || fail "the release of job $j2 was not logged"

# Each job starts at its begin time: not before, at most 4 s after.
while read -r job start; do
  case $job in "$j1") b=$b1 ;; "$j2") b=$e2 ;; "$j3") b=$b3 ;; esac
  late=$(awk -v s="$start" -v b="$b" 'BEGIN { printf "%.2f", s - b }')
  log "job $job started $late s after its begin time"
  awk -v l="$late" 'BEGIN { exit !(l >= -1 && l <= 5) }' ||
    fail "job $job started $late s after its begin time (expected 0 to 5; -1 for rounding)"
done < <(watch_starts "$j1" "$j2" "$j3")

# 4. The documented sequence, recomputed; the generator's median and sigma.
python3 - "$DIR/log/queue-wait.log" "$MEDIAN" "$SIGMA" "$SEED" <<'PY' || fail "draws are not the documented sequence"
import math, re, statistics, sys
log, median, sigma, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
M = 2147483647
def draws(n, seed=seed, median=median, sigma=sigma, whole=True):
    """The documented stream: MINSTD from (seed x 1000003 + 12345) mod (M - 1) + 1,
    8 outputs skipped, two a draw, Box-Muller, the lognormal rounded to seconds."""
    x = (seed * 1000003 + 12345) % (M - 1) + 1
    for _ in range(8):
        x = 48271 * x % M
    out = []
    for _ in range(n):
        x = 48271 * x % M
        u1 = x / M
        x = 48271 * x % M
        u2 = x / M
        w = median * math.exp(sigma * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2))
        out.append(math.floor(w + 0.5) if whole else w)
    return out
seen = [(int(k), int(w)) for k, w in re.findall(r"submit draw=(\d+) .* wait_s=(\d+)", open(log).read())]
assert len(seen) == 3, seen
expect = draws(3)
for k, w in seen:
    assert w == expect[k], (k, w, expect[k])
ws = draws(2000, whole=False)
med = statistics.median(ws)
logs = [math.log(w) for w in ws]
sd = statistics.pstdev(logs)
# Successive draws independent: the lag-1 correlation of their logs near 0.
m = statistics.fmean(logs)
lag1 = sum((a - m) * (b - m) for a, b in zip(logs, logs[1:])) / (len(logs) - 1) / sd ** 2
print("2000 draws: median %.2f s (asked %.0f), sigma of the log %.3f (asked %.2f), "
      "lag-1 correlation %.3f" % (med, median, sd, sigma, lag1))
assert abs(med / median - 1) < 0.08, med
assert abs(sd - sigma) < 0.05, sd
assert abs(lag1) < 0.1, lag1
PY
log "PASS: each job waited its draw (jobs $j1 $j2 $j3: $w1, $w2 from its release, $w3 s)"
