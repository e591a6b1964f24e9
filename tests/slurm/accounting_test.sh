#!/usr/bin/env bash
# End-to-end test of `deploy/slurm/local-cluster up --accounting`: a real
# 2-node Slurm 22.05 cluster with its own slurmdbd and MariaDB, on this
# machine. Checks what the controller relies on where a site has accounting:
# `scontrol show config` names accounting_storage/slurmdbd (DetectAccounting)
# and `sacct -D -n -P -X -o JobID,State,ExitCode,NodeList -j ID` (AccountingJob)
# reports jobs that have left squeue, each run of a requeued one. Needs root, slurm-wlm, munge, slurmdbd
# and mariadb-server (deploy/setup.sh). Exits non-zero on the first failed check.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
LC="$ROOT/deploy/slurm/local-cluster"
FIXTURE="$ROOT/tests/fixtures/slurm/sacct_2205.txt"
T0=$SECONDS

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the local cluster needs root"
  exit 77
fi
for b in slurmdbd sacct sacctmgr mariadb-install-db; do
  if ! command -v "$b" >/dev/null; then
    echo "SKIP: $b is not installed (deploy/setup.sh installs slurmdbd and mariadb-server)"
    exit 77
  fi
done

D=$(mktemp -d "${TMPDIR:-/tmp}/acct-test.XXXXXX")
D2=$(mktemp -d "${TMPDIR:-/tmp}/acct-test2.XXXXXX")
# Port bases of their own (local_cluster_test.sh uses 18000-19999), spread by
# pid so that parallel runs rarely meet. A 2-node cluster with accounting
# uses P..P+4 (slurmdbd P+3, mysqld P+4), the 1-node second one P2..P2+3.
PB=$((20000 + ($$ % 90) * 10))
PB2=$((PB + 1000))

cleanup() {
  local rc=$?
  "$LC" down "$D2" >/dev/null 2>&1 || true
  "$LC" down "$D" >/dev/null 2>&1 || true
  rm -rf "$D" "$D2"
  if [ $rc -ne 0 ]; then echo "FAILED (rc=$rc) after $((SECONDS - T0)) s"; fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  local d f
  for d in "$D" "$D2"; do
    [ -d "$d/log" ] || continue
    for f in "$d"/log/*.log "$d"/log/*.out; do
      [ -s "$f" ] || continue
      echo "--- $f" >&2; tail -n 10 "$f" >&2
    done
  done
  exit 1
}
check() { echo "check: $*"; }
ok() { echo "  ok${1:+: $1}"; }

# Slurm clients against a test cluster (the test's own environment is left
# untouched so that the process scans below cannot see it).
sl() { (. "$D/env" && "$@"); }
sl2() { (. "$D2/env" && "$@"); }

# Pids (other than ours) whose command line names DIR (as a whole path), or
# whose environment points SLURM_CONF at it.
procs_of() {
  local dir=$1 f p found=()
  local -A mine=()
  p=$BASHPID
  while [ -n "$p" ] && [ "$p" != 0 ]; do
    mine[$p]=1
    p=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$p/stat" 2>/dev/null) || break
  done
  local hits re
  re="(^|[^A-Za-z0-9/._+-])$(sed 's/[.+]/\\&/g' <<<"$dir")(/|[^A-Za-z0-9._+-]|\$)"
  hits=$( { grep -lzE -- "$re" /proc/[0-9]*/cmdline 2>/dev/null || true
            grep -lzxF -- "SLURM_CONF=$dir/etc/slurm.conf" /proc/[0-9]*/environ 2>/dev/null || true
            grep -lzxF -- "TRELLIS_LOCAL_CLUSTER_DAEMON=$dir" /proc/[0-9]*/environ 2>/dev/null || true; } )
  for f in $hits; do
    p=${f#/proc/}; p=${p%%/*}
    [ -n "${mine[$p]:-}" ] && continue
    [ -r "/proc/$p/stat" ] || continue
    # Zombies are gone already.
    [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
    found+=("$p $(cat "/proc/$p/comm" 2>/dev/null) $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)")
  done
  [ ${#found[@]} -eq 0 ] || printf '%s\n' "${found[@]}" | sort -u
}

# wait_gone ID SECONDS: until job ID has left squeue.
wait_gone() {
  local deadline=$((SECONDS + $2))
  while [ -n "$(sl squeue -h -j "$1" -o '%i' 2>/dev/null)" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.3
  done
}

# sacct_line ID: the controller's query (SlurmCliClient::AccountingJob).
sacct_line() { sl sacct -D -n -P -X -o JobID,State,ExitCode,NodeList -j "$1"; }

# wait_state ID STATE SECONDS: until squeue lists job ID in STATE.
wait_state() {
  local deadline=$((SECONDS + $3))
  until [ "$(sl squeue -h -j "$1" -o '%T' 2>/dev/null)" = "$2" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}

# wait_sacct ID WANT SECONDS: until sacct prints exactly WANT for job ID
# (slurmctld sends finished jobs to slurmdbd a moment after they end).
wait_sacct() {
  local id=$1 want=$2 got deadline=$((SECONDS + $3))
  while :; do
    got=$(sacct_line "$id" 2>&1 || true)
    [ "$got" = "$want" ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      echo "$got"; return 1
    fi
    sleep 0.5
  done
}

echo "accounting test: DIR=$D"

check "up --accounting with 2 nodes on its own port base"
t=$SECONDS
for try in 1 2 3; do
  if up_out=$("$LC" up "$D" --nodes 2 --port-base "$PB" --accounting 2>&1); then break; fi
  # Another run may hold these ports: move on (nothing was started).
  if ! grep -q 'is in use' <<<"$up_out" || [ $try -eq 3 ]; then fail "up failed: $up_out"; fi
  PB=$((PB + 7)); PB2=$((PB + 1000))
done
echo "$up_out"
grep -q "slurmctld port $PB," <<<"$up_out" || fail "up did not use port base $PB"
grep -q "slurmdbd port $((PB + 3)), mysqld port $((PB + 4))" <<<"$up_out" ||
  fail "up did not put slurmdbd on P+N+1 and mysqld on P+N+2"
ok "up took $((SECONDS - t)) s"

check "status lists mysqld and slurmdbd running, on their ports"
st=$("$LC" status "$D") || fail "status exit code $? while up: $st"
grep -q "^mysqld *running (pid [0-9]*, port $((PB + 4)))" <<<"$st" || fail "status: no mysqld: $st"
grep -q "^slurmdbd *running (pid [0-9]*, port $((PB + 3)))" <<<"$st" || fail "status: no slurmdbd: $st"
grep -q "accounting (slurmdbd port $((PB + 3)), mysqld port $((PB + 4)))" <<<"$st" || fail "status header: $st"
ok

check "everything of the database lives under DIR"
mpid=$(cat "$D/run/mysqld.pid")
mcmd=$(tr '\0' ' ' <"/proc/$mpid/cmdline")
for want in --no-defaults "--datadir=$D/db" "--socket=$D/run/mysqld.sock" "--port=$((PB + 4))" \
            --bind-address=127.0.0.1; do
  grep -q -- "$want" <<<"$mcmd" || fail "mysqld command line lacks $want: $mcmd"
done
[ -S "$D/run/mysqld.sock" ] || fail "no mysqld socket in $D/run"
[ -d "$D/db/$(sed -n 's/^StorageLoc=//p' "$D/etc/slurmdbd.conf")" ] || fail "no slurm_acct_db in $D/db"
ok "mysqld pid $mpid"

check "slurmdbd.conf is 0600 and owned by root (SlurmUser); slurm.conf points at slurmdbd"
[ "$(stat -c '%a %U' "$D/etc/slurmdbd.conf")" = "600 root" ] ||
  fail "slurmdbd.conf is $(stat -c '%a %U' "$D/etc/slurmdbd.conf")"
grep -qx "DbdPort=$((PB + 3))" "$D/etc/slurmdbd.conf" || fail "slurmdbd.conf DbdPort"
grep -qx "StoragePort=$((PB + 4))" "$D/etc/slurmdbd.conf" || fail "slurmdbd.conf StoragePort"
grep -qx 'AccountingStorageType=accounting_storage/slurmdbd' "$D/etc/slurm.conf" || fail "slurm.conf AccountingStorageType"
grep -qx "AccountingStoragePort=$((PB + 3))" "$D/etc/slurm.conf" || fail "slurm.conf AccountingStoragePort"
grep -qx 'JobAcctGatherType=jobacct_gather/linux' "$D/etc/slurm.conf" || fail "slurm.conf JobAcctGatherType"
ok

check "scontrol show config says accounting_storage/slurmdbd (what DetectAccounting reads)"
line=$(sl scontrol show config | grep '^AccountingStorageType') || fail "no AccountingStorageType in scontrol show config"
grep -q 'accounting_storage/slurmdbd' <<<"$line" || fail "scontrol show config: $line"
ok "$line"

check "sacctmgr knows the cluster and the running user"
sl sacctmgr -n -P list cluster format=cluster | grep -qx trellis-local || fail "cluster: $(sl sacctmgr list cluster 2>&1)"
sl sacctmgr -n -P list association cluster=trellis-local account=trellis user=root format=user |
  grep -qx root || fail "root in account trellis: $(sl sacctmgr list association 2>&1)"
ok

check "a failing and a succeeding 2-node job show in sacct after they leave squeue"
j_fail=$(sl sbatch --parsable -N 2 -o "$D/job-%j.out" --wrap 'srun --ntasks-per-node=1 true; exit 3') || fail "sbatch (exit 3)"
j_ok=$(sl sbatch --parsable -N 2 -o "$D/job-%j.out" --wrap 'srun --ntasks-per-node=1 hostname') || fail "sbatch (exit 0)"
wait_gone "$j_fail" 60 || fail "job $j_fail still in squeue: $(sl squeue)"
wait_gone "$j_ok" 60 || fail "job $j_ok still in squeue: $(sl squeue)"
got=$(wait_sacct "$j_fail" "$j_fail|FAILED|3:0|node[1-2]" 30) || fail "sacct for job $j_fail: '$got'"
got=$(wait_sacct "$j_ok" "$j_ok|COMPLETED|0:0|node[1-2]" 30) || fail "sacct for job $j_ok: '$got'"
# The parser test's fixture (controller/slurm/parsers_test.cc) is this very
# output: both jobs in one query, job ids renumbered from 1.
both=$(sl sacct -D -n -P -X -o JobID,State,ExitCode,NodeList -j "$j_fail,$j_ok")
norm=$(awk -F'|' -v a="$j_fail" -v b="$j_ok" 'BEGIN { OFS = "|" } $1 == a { $1 = 1 } $1 == b { $1 = 2 } { print }' <<<"$both")
[ "$norm" = "$(cat "$FIXTURE")" ] || fail "sacct output differs from $FIXTURE:
$both"
if [ -n "${TRELLIS_TEST_ARTIFACTS:-}" ]; then
  mkdir -p "$TRELLIS_TEST_ARTIFACTS" && printf '%s\n' "$both" >"$TRELLIS_TEST_ARTIFACTS/sacct_2205.txt"
fi
ok "$(tr '\n' ' ' <<<"$both")"

check "a job Slurm requeued: sacct -D lists each run, the latest last"
# What the controller counts as the job's restarts once scontrol has forgotten
# it (ParseSacct): here 1, the SLURM_RESTART_COUNT of the run that completed.
# The run after the requeue goes to the other node: the first one refuses the
# job's revoked credential for a while (why Slurm holds a requeued job back).
j_rq=$(sl sbatch --parsable --requeue -N 1 -w node1 -o "$D/job-%j.out" \
  --wrap 'srun true; echo "restart count $SLURM_RESTART_COUNT on $SLURMD_NODENAME"; sleep 5') ||
  fail "sbatch (requeued)"
wait_state "$j_rq" RUNNING 60 || fail "job $j_rq not running: $(sl squeue)"
sl scontrol requeue "$j_rq" || fail "scontrol requeue $j_rq"
wait_state "$j_rq" PENDING 30 || fail "job $j_rq not pending after the requeue: $(sl squeue)"
sl scontrol update jobid="$j_rq" ReqNodeList=node2 StartTime=now || fail "scontrol update $j_rq"
wait_gone "$j_rq" 90 || fail "job $j_rq still in squeue: $(sl squeue)"
grep -qx "restart count 1 on node2" "$D/job-$j_rq.out" ||
  fail "the last run's output: $(cat "$D/job-$j_rq.out")"
want="$j_rq|REQUEUED|0:0|node1
$j_rq|COMPLETED|0:0|node2"
got=$(wait_sacct "$j_rq" "$want" 30) || fail "sacct -D for job $j_rq: '$got'"
got=$(sacct_line "$j_rq")
FIXTURE_RQ="$ROOT/tests/fixtures/slurm/sacct_2205_requeued.txt"
norm=$(awk -F'|' -v a="$j_rq" 'BEGIN { OFS = "|" } $1 == a { $1 = 3 } { print }' <<<"$got")
[ "$norm" = "$(cat "$FIXTURE_RQ")" ] || fail "sacct -D output differs from $FIXTURE_RQ:
$got"
ok "$(tr '\n' ' ' <<<"$got")"

check "up after slurmdbd died restarts it; sacct answers again"
pid_mysqld=$(cat "$D/run/mysqld.pid") pid_ctld=$(cat "$D/run/slurmctld.pid")
kill -9 "$(cat "$D/run/slurmdbd.pid")"
for _ in $(seq 25); do "$LC" status "$D" >/dev/null || break; sleep 0.2; done
"$LC" status "$D" >/dev/null && fail "status exit 0 with slurmdbd dead"
again=$("$LC" up "$D") || fail "up after slurmdbd died: $again"
grep -q 'partly up' <<<"$again" || fail "up did not report a partial restart: $again"
[ "$(cat "$D/run/mysqld.pid")" = "$pid_mysqld" ] || fail "mysqld was restarted"
[ "$(cat "$D/run/slurmctld.pid")" = "$pid_ctld" ] || fail "slurmctld was restarted"
"$LC" status "$D" >/dev/null || fail "status after the partial restart"
got=$(wait_sacct "$j_fail" "$j_fail|FAILED|3:0|node[1-2]" 30) || fail "sacct after the restart: '$got'"
again=$("$LC" up "$D" --accounting) || fail "up again: $again"
grep -q 'already up' <<<"$again" || fail "up --accounting on the running cluster: $again"
ok

check "a second cluster with accounting runs beside the first, each with its own records"
"$LC" up "$D2" --nodes 1 --port-base "$PB2" --accounting >/dev/null || fail "second cluster up"
grep -qx "DbdPort=$((PB2 + 2))" "$D2/etc/slurmdbd.conf" || fail "second cluster's DbdPort"
j2=$(sl2 sbatch --parsable -N 1 -J only-in-second -o "$D2/job-%j.out" --wrap 'exit 0') || fail "sbatch on the second cluster"
wait_gone_2() { for _ in $(seq 200); do [ -z "$(sl2 squeue -h -j "$j2" -o '%i')" ] && return 0; sleep 0.3; done; return 1; }
wait_gone_2 || fail "job $j2 of the second cluster did not finish"
for _ in $(seq 60); do
  [ "$(sl2 sacct -n -P -X -o JobName,State)" = "only-in-second|COMPLETED" ] && break
  sleep 0.5
done
[ "$(sl2 sacct -n -P -X -o JobName,State)" = "only-in-second|COMPLETED" ] ||
  fail "second cluster's sacct: $(sl2 sacct -n -P -X -o JobID,JobName,State 2>&1)"
sl sacct -n -P -X -o JobName | grep -q only-in-second && fail "the first cluster's sacct has the second's job"
"$LC" down "$D2" >/dev/null || fail "second cluster down"
[ -z "$(procs_of "$D2")" ] || fail "processes left after the second's down: $(procs_of "$D2")"
"$LC" status "$D" >/dev/null || fail "the first cluster is not up after the second's down"
got=$(wait_sacct "$j_ok" "$j_ok|COMPLETED|0:0|node[1-2]" 10) || fail "first cluster's sacct after the second's down: '$got'"
ok "$D2 on $PB2"

check "down stops slurmdbd and mysqld too and leaves no process of DIR"
t=$SECONDS
"$LC" down "$D" || fail "down failed"
ok "down took $((SECONDS - t)) s"
left=$(procs_of "$D")
[ -z "$left" ] || fail "processes left after down:
$left"
# One name per pgrep: it matches nothing (only warns) for a pattern over 15 characters.
for p in $(for name in mariadbd mysqld slurmdbd; do pgrep -x "$name" || true; done); do
  grep -qzF -- "$D" "/proc/$p/cmdline" "/proc/$p/environ" 2>/dev/null &&
    fail "$(cat "/proc/$p/comm") $p of $D survived down"
done
[ ! -S "$D/run/mysqld.sock" ] || fail "mysqld socket left behind"
"$LC" status "$D" >/dev/null && fail "status exit 0 after down"
ok "no mysqld or slurmdbd of $D"

echo "PASS: accounting test in $((SECONDS - T0)) s"
