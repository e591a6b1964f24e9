#!/usr/bin/env bash
# End-to-end test of deploy/slurm/local-cluster: a real 4-node Slurm cluster
# on this machine. Needs root, slurm-wlm and munge (deploy/setup.sh).
# Exits non-zero on the first failed check.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
LC="$ROOT/deploy/slurm/local-cluster"
T0=$SECONDS

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the local cluster needs root"
  exit 77
fi

D=$(mktemp -d "${TMPDIR:-/tmp}/lc-test.XXXXXX")
# The second cluster's path ends with the first's (/tmp/lc-test2.Y/tmp/lc-test.X):
# stopping or restarting the first must not take it for one of its own.
D2BASE=$(mktemp -d "${TMPDIR:-/tmp}/lc-test2.XXXXXX")
D2=$D2BASE$D
# A non-default port base, spread by pid so that parallel runs rarely meet.
PB=$((18000 + ($$ % 90) * 10))
PB2=$((PB + 1000))

cleanup() {
  local rc=$?
  "$LC" down "$D2" >/dev/null 2>&1 || true
  "$LC" down "$D" >/dev/null 2>&1 || true
  rm -rf "$D" "$D2BASE"
  if [ $rc -ne 0 ]; then echo "FAILED (rc=$rc) after $((SECONDS - T0)) s"; fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  if [ -d "$D/log" ]; then
    for f in "$D"/log/*.log; do echo "--- $f" >&2; tail -n 10 "$f" >&2; done
  fi
  exit 1
}
check() { echo "check: $*"; }
ok() { echo "  ok${1:+: $1}"; }

# Slurm client against the test cluster (the test's own environment is left
# untouched so that the process scans below cannot see it).
sl() { (. "$D/env" && "$@"); }

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
  local hits
  local re
  re="(^|[^A-Za-z0-9/._+-])$(sed 's/[.+]/\\&/g' <<<"$dir")(/|[^A-Za-z0-9._+-]|\$)"
  hits=$( { grep -lzE -- "$re" /proc/[0-9]*/cmdline 2>/dev/null || true
            grep -lzxF -- "SLURM_CONF=$dir/etc/slurm.conf" /proc/[0-9]*/environ 2>/dev/null || true; } )
  for f in $hits; do
    p=${f#/proc/}; p=${p%%/*}
    [ -n "${mine[$p]:-}" ] && continue
    [ -r "/proc/$p/stat" ] || continue
    # Zombies are gone already.
    [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
    found+=("$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)")
  done
  [ ${#found[@]} -eq 0 ] || printf '%s\n' "${found[@]}" | sort -u
}

wait_job() {
  # wait_job ID SECONDS: until the job leaves PENDING/RUNNING/COMPLETING.
  local id=$1 st deadline=$((SECONDS + $2))
  while :; do
    st=$(sl scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case "$st" in
      PENDING|RUNNING|COMPLETING|CONFIGURING|"") ;;
      *) echo "$st"; return 0;;
    esac
    [ $SECONDS -ge $deadline ] && { echo "TIMEOUT($st)"; return 1; }
    sleep 0.3
  done
}

echo "local cluster test: DIR=$D"

check "--help prints usage"
"$LC" --help | grep -q 'local-cluster COMMAND DIR' || fail "--help"
ok

check "up with 4 nodes on a non-default port base"
t=$SECONDS
for try in 1 2 3; do
  if up_out=$("$LC" up "$D" --nodes 4 --port-base "$PB" 2>&1); then break; fi
  # Another run may hold these ports: move on (nothing was started).
  if ! grep -q 'is in use' <<<"$up_out" || [ $try -eq 3 ]; then fail "up failed: $up_out"; fi
  PB=$((PB + 7)); PB2=$((PB + 1000))
done
echo "$up_out"
grep -q "slurmctld port $PB" <<<"$up_out" || fail "up did not use port base $PB"
ok "up took $((SECONDS - t)) s"

check "sinfo shows 4 idle nodes"
idle=$(sl sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | wc -l)
[ "$idle" -eq 4 ] || fail "expected 4 idle nodes, got $idle: $(sl sinfo -N)"
ok

check "status exits 0 and lists every daemon"
st=$("$LC" status "$D") || fail "status exit code $? while up"
for n in munged slurmctld 'slurmd node1' 'slurmd node4'; do
  grep -q "^$n *running" <<<"$st" || fail "status does not show '$n' running: $st"
done
ok

check "env file exports SLURM_CONF, TRELLIS_SYSFS_ROOT, TRELLIS_LOCAL_CLUSTER"
(
  set -u
  . "$D/env"
  [ "$SLURM_CONF" = "$D/etc/slurm.conf" ] && [ -f "$SLURM_CONF" ] || exit 1
  [ "$TRELLIS_LOCAL_CLUSTER" = "$D" ] || exit 1
  [ "$TRELLIS_SYSFS_ROOT" = "$D/nodes/%n/sysfs" ] || exit 1
) || fail "env file: $(cat "$D/env")"
ok

check "each node has a sysfs fixture in the Linux per-node meminfo format"
for k in 1 2 3 4; do
  base="$D/nodes/node$k/sysfs/devices/system/node"
  [ "$(cat "$base/online")" = 0 ] || fail "node$k online"
  [ "$(cat "$base/possible")" = 0 ] || fail "node$k possible"
  [ "$(cat "$base/node0/cpulist")" = 0-1 ] || fail "node$k cpulist"
  m="$base/node0/meminfo"
  [ "$(wc -l <"$m")" -eq 36 ] || fail "node$k meminfo has $(wc -l <"$m") lines"
  bad=$(grep -vE '^Node 0 [A-Za-z_()]+: +[0-9]+( kB)?$' "$m" || true)
  [ -z "$bad" ] || fail "node$k meminfo has malformed lines: $bad"
  grep -qx 'Node 0 MemTotal:       125514547 kB' "$m" || fail "node$k MemTotal: $(grep MemTotal "$m")"
  grep -qx 'Node 0 MemFree:        113246208 kB' "$m" || fail "node$k MemFree: $(grep MemFree: "$m")"
  grep -qx 'Node 0 HugePages_Total:     0' "$m" || fail "node$k HugePages_Total format"
done
ok "119.7 GiB total, 108.0 GiB free on every node"

check "a 2-node batch job runs one srun task per node, each sees its own fixture"
out="$D/job-%j.out"
jid=$(sl sbatch --parsable -N 2 -o "$out" --wrap \
  'srun --ntasks-per-node=1 bash -c "r=\${TRELLIS_SYSFS_ROOT//%n/\$SLURMD_NODENAME}; echo \$SLURMD_NODENAME \$(grep -c MemFree \$r/devices/system/node/node0/meminfo) \$r"') \
  || fail "sbatch"
state=$(wait_job "$jid" 30) || fail "job $jid did not finish: $state"
[ "$state" = COMPLETED ] || fail "job $jid ended $state: $(cat "$D/job-$jid.out" 2>/dev/null)"
job_out=$(cat "$D/job-$jid.out")
names=$(awk '$2 == 1 { print $1 }' <<<"$job_out" | sort -u)
[ "$(wc -l <<<"$names")" -eq 2 ] || fail "expected 2 distinct nodes reading their fixture, got: $job_out"
grep -qvx 'node[1-4]' <<<"$names" && fail "unexpected node names: $names"
sl scontrol show job "$jid" | grep -q 'ExitCode=0:0' || fail "job exit code"
while read -r n _ r; do
  [ "$r" = "$D/nodes/$n/sysfs" ] || fail "task on $n got sysfs root '$r'"
done <<<"$job_out"
ok "job $jid on $(tr '\n' ' ' <<<"$names")"

check "tasks get their node's sysfs root even when the submitter exports nothing"
jid=$(sl sbatch --parsable -N 2 --export=NONE -o "$D/job-%j.out" --wrap \
  '/usr/bin/srun --ntasks-per-node=1 /bin/sh -c "echo \$SLURMD_NODENAME \$TRELLIS_SYSFS_ROOT"') || fail "sbatch"
state=$(wait_job "$jid" 30) || fail "job $jid did not finish: $state"
[ "$state" = COMPLETED ] || fail "job $jid ended $state: $(cat "$D/job-$jid.out" 2>/dev/null)"
[ "$(wc -l <"$D/job-$jid.out")" -eq 2 ] || fail "job $jid output: $(cat "$D/job-$jid.out")"
while read -r n r; do
  [ "$r" = "$D/nodes/$n/sysfs" ] || fail "task on $n got sysfs root '$r' from the task prolog"
done <"$D/job-$jid.out"
ok

check "up again is a no-op"
pid_before=$(cat "$D/run/slurmctld.pid")
again=$("$LC" up "$D" --port-base "$PB") || fail "second up failed"
grep -q 'already up' <<<"$again" || fail "second up did not report 'already up': $again"
[ "$(cat "$D/run/slurmctld.pid")" = "$pid_before" ] || fail "slurmctld was restarted"
ok

check "up with a different shape on a running cluster is refused"
if "$LC" up "$D" --nodes 3 >/dev/null 2>&1; then fail "up --nodes 3 on a 4-node cluster succeeded"; fi
ok

check "up after one slurmd died restarts just that one"
pid_ctld=$(cat "$D/run/slurmctld.pid")
kill -9 "$(cat "$D/run/slurmd-node2.pid")"
"$LC" status "$D" >/dev/null && fail "status exit 0 with slurmd node2 dead"
again=$("$LC" up "$D") || fail "up after slurmd node2 died"
grep -q 'partly up' <<<"$again" || fail "up did not report a partial restart: $again"
[ "$(cat "$D/run/slurmctld.pid")" = "$pid_ctld" ] || fail "slurmctld was restarted"
"$LC" status "$D" >/dev/null || fail "status after the partial restart"
ok

check "a second cluster with another port base runs beside the first"
"$LC" up "$D2" --nodes 1 --port-base "$PB2" >/dev/null || fail "second cluster up"
second_up() {  # WHEN: the second cluster still runs, with the same daemons
  local n2
  n2=$( (. "$D2/env" && timeout 10 sinfo -h -N -o '%N %T') ) || true
  [ "$n2" = "node1 idle" ] || fail "second cluster $1: sinfo says '$n2'"
  [ "$(cat "$D2"/run/*.pid | tr '\n' ' ')" = "$pids2" ] || fail "second cluster $1: daemons restarted"
  "$LC" status "$D2" >/dev/null || fail "second cluster $1: status is not up"
}
pids2=$(cat "$D2"/run/*.pid | tr '\n' ' ')
second_up "after its up"
idle=$(sl sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | wc -l)
[ "$idle" -eq 4 ] || fail "first cluster lost nodes while the second ran"
ok "$D2 on $PB2 (left up until the first is down)"

check "swap node3's fixture for the short one, then reset it"
m3="$D/nodes/node3/sysfs/devices/system/node/node0/meminfo"
before=$(cat "$m3")
"$LC" fixture "$D" node3 "$ROOT/deploy/slurm/fixtures/gh200-short" >/dev/null || fail "fixture swap"
after=$(cat "$m3")
[ "$before" != "$after" ] || fail "node3 meminfo did not change"
grep -qx 'Node 0 MemFree:        76231475 kB' "$m3" || fail "node3 MemFree after swap: $(grep MemFree: "$m3")"
cmp -s "$m3" "$D/nodes/node2/sysfs/devices/system/node/node0/meminfo" && fail "node2 changed too"
"$LC" fixture "$D" node3 --free-gib 90.5 >/dev/null || fail "synthesized fixture"
grep -qx 'Node 0 MemFree:        94896128 kB' "$m3" || fail "node3 MemFree after --free-gib 90.5: $(grep MemFree: "$m3")"
"$LC" fixture "$D" node3 --reset >/dev/null || fail "fixture --reset"
[ "$(cat "$m3")" = "$before" ] || fail "node3 meminfo not back to default after --reset"
if "$LC" fixture "$D" node9 --reset >/dev/null 2>&1; then fail "fixture on a missing node succeeded"; fi
ok

check "reset cancels jobs, resumes a drained node and restores every fixture"
sl scontrol update nodename=node3 state=drain reason=test || fail "drain node3"
sl sbatch --parsable --hold -o "$D/job-%j.out" --wrap true >/dev/null || fail "sbatch --hold"
sl sbatch --parsable -N 1 -o "$D/job-%j.out" --wrap 'sleep 300' >/dev/null || fail "sbatch sleep"
"$LC" fixture "$D" all gh200-short >/dev/null || fail "fixture all"
grep -q 'MemFree:        76231475 kB' "$D/nodes/node1/sysfs/devices/system/node/node0/meminfo" || fail "fixture all: node1"
"$LC" reset "$D" || fail "reset"
[ -z "$(sl squeue -h)" ] || fail "jobs left after reset: $(sl squeue)"
idle=$(sl sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | wc -l)
[ "$idle" -eq 4 ] || fail "after reset: $(sl sinfo -N)"
[ "$(cat "$m3")" = "$before" ] || fail "node3 fixture not back to default after reset"
ok

check "up after a crash (daemons killed, stale pid files) starts cleanly"
sl sbatch --parsable -N 1 -o "$D/job-%j.out" --wrap 'sleep 300' >/dev/null || fail "sbatch before crash"
sleep 1
for f in "$D"/run/*.pid; do kill -9 "$(cat "$f")" 2>/dev/null || true; done
sleep 0.5
"$LC" status "$D" >/dev/null && fail "status exit 0 after the crash"
t=$SECONDS
"$LC" up "$D" --port-base "$PB" >/dev/null || fail "up after crash"
idle=$(sl sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | wc -l)
[ "$idle" -eq 4 ] || fail "after crash: $idle idle nodes"
left=$(procs_of "$D" | grep -E 'sleep 300' || true)
[ -z "$left" ] || fail "job of the crashed cluster still runs: $left"
second_up "after the first's restart from a crash"
ok "restarted in $((SECONDS - t)) s"

check "down cancels running jobs and leaves no process behind"
jid=$(sl sbatch --parsable -N 2 -o "$D/job-%j.out" --wrap 'srun --ntasks-per-node=1 sleep 300') || fail "sbatch"
for _ in $(seq 50); do
  [ "$(procs_of "$D" | grep -c 'sleep 300' || true)" -ge 2 ] && break
  sleep 0.2
done
[ "$(procs_of "$D" | grep -c 'sleep 300' || true)" -ge 2 ] || fail "job $jid did not start its tasks"
t=$SECONDS
"$LC" down "$D" || fail "down failed"
ok "down took $((SECONDS - t)) s"
left=$(procs_of "$D")
[ -z "$left" ] || fail "processes left after down:
$left"
for f in "$D"/run/*.pid; do
  [ -e "$f" ] || continue
  p=$(cat "$f")
  [ -d "/proc/$p" ] && grep -q . "/proc/$p/cmdline" && fail "pid file $f: $p still alive"
done
ok "no process references $D"
second_up "after the first's down"
"$LC" down "$D2" >/dev/null || fail "second cluster down"
[ -z "$(procs_of "$D2")" ] || fail "processes left after the second's down: $(procs_of "$D2")"
ok "the second cluster ran on until its own down"

check "status after down exits 1"
"$LC" status "$D" >/dev/null && fail "status exit 0 after down"
ok

check "down again succeeds; down on a never-started directory succeeds"
"$LC" down "$D" >/dev/null || fail "second down"
"$LC" down "$D/never-started" >/dev/null || fail "down of an unknown DIR"
ok

check "GPU nodes (--gpus-per-node), host sysfs and a staged prefix"
# Two nodes x 2 GPUs on device files of our own (char devices: Slurm checks
# the type); a prefix that mirrors this machine's Slurm through links.
G=$D/gpu-devs P=$D/prefix
mkdir -p "$G" "$P/usr/sbin" "$P/usr/bin" "$P/usr/lib/x86_64-linux-gnu"
for i in 0 1 2 3; do mknod "$G/nvidia$i" c 1 3 || fail "mknod"; done
for b in slurmctld slurmd slurmstepd munged; do ln -s "$(readlink -f "$(command -v "$b")")" "$P/usr/sbin/$b"; done
for b in sbatch srun squeue sinfo scontrol scancel; do ln -s "$(readlink -f "$(command -v "$b")")" "$P/usr/bin/$b"; done
ln -s "$(dirname "$(find /usr/lib -name auth_munge.so -path '*slurm*' | head -1)")" "$P/usr/lib/x86_64-linux-gnu/slurm-wlm"
D3=$D/gpu-cluster
LOCAL_CLUSTER_GPU_DEVICE_DIR=$G "$LC" up "$D3" --nodes 2 --port-base $((PB2 + 10)) --gpus-per-node 2 \
  --host-sysfs --prefix "$P" >/dev/null || fail "up with GPUs"
grep -qx "PluginDir=$(cd "$P" && pwd -P)/usr/lib/x86_64-linux-gnu/slurm-wlm" "$D3/etc/slurm.conf" || fail "no PluginDir"
tr '\0' ' ' <"/proc/$(cat "$D3/run/slurmd-node1.pid")/cmdline" | grep -q -- "-d $P/usr/sbin/slurmstepd" ||
  fail "slurmd does not run the prefix's slurmstepd"
out=$D3/gpus.out
for g in 2 1; do
  (. "$D3/env" && sbatch --parsable -N 2 --gpus-per-node=$g -o "$out.$g" \
     --wrap 'srun --ntasks-per-node=1 sh -c "echo \$SLURMD_NODENAME \$CUDA_VISIBLE_DEVICES \$TRELLIS_SYSFS_ROOT \${NCCL_HOSTID-unset}"') >/dev/null ||
    fail "sbatch --gpus-per-node=$g"
done
for _ in $(seq 100); do [ "$(cat "$out.2" "$out.1" 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 0.2; done
[ "$(sort "$out.2" | tr '\n' ' ')" = "node1 0,1 /sys unset node2 2,3 /sys unset " ] || fail "2 GPUs per node: $(cat "$out.2" 2>&1)"
[ "$(sort "$out.1" | tr '\n' ' ')" = "node1 0 /sys unset node2 2 /sys unset " ] || fail "1 GPU per node: $(cat "$out.1" 2>&1)"
if LOCAL_CLUSTER_GPU_DEVICE_DIR=$G "$LC" up "$D/too-many" --nodes 3 --port-base $((PB2 + 20)) --gpus-per-node 2 >/dev/null 2>&1; then
  fail "3 nodes x 2 GPUs on 4 devices came up"
fi
"$LC" down "$D3" >/dev/null || fail "down of the GPU cluster"
ok "each node's tasks see its own GPUs"

check "--share-gpus: every node on the same GPUs, a host of its own for NCCL"
if "$LC" up "$D/share-no-gpus" --nodes 2 --port-base $((PB2 + 30)) --share-gpus >/dev/null 2>"$D/share.err"; then
  fail "--share-gpus without --gpus-per-node came up"
fi
grep -q -- "--share-gpus shares the GPUs of --gpus-per-node" "$D/share.err" || fail "unclear error: $(cat "$D/share.err")"
# Three nodes x 2 GPUs on 4 devices: too many unless shared.
D4=$D/shared-cluster
LOCAL_CLUSTER_GPU_DEVICE_DIR=$G "$LC" up "$D4" --nodes 3 --port-base $((PB2 + 30)) --gpus-per-node 2 \
  --share-gpus >/dev/null || fail "up with shared GPUs"
grep -q "NodeName=node3 Name=gpu File=$G/nvidia\[0-1\]" "$D4/etc/gres.conf" || fail "gres.conf: $(cat "$D4/etc/gres.conf")"
out=$D4/gpus.out
(. "$D4/env" && sbatch --parsable -N 3 --gpus-per-node=2 -o "$out" --wrap 'srun --ntasks-per-node=1 \
   sh -c "echo \$SLURMD_NODENAME \$CUDA_VISIBLE_DEVICES \$NCCL_HOSTID \$NCCL_SOCKET_IFNAME \$NCCL_IB_DISABLE"') \
  >/dev/null || fail "sbatch on shared GPUs"
for _ in $(seq 100); do [ "$(cat "$out" 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.2; done
want="node1 0,1 trellis-local-node1 lo 1 node2 0,1 trellis-local-node2 lo 1 node3 0,1 trellis-local-node3 lo 1 "
[ "$(sort "$out" | tr '\n' ' ')" = "$want" ] || fail "shared GPUs: $(cat "$out" 2>&1)"
"$LC" down "$D4" >/dev/null || fail "down of the shared-GPU cluster"
ok "3 nodes on 2 shared GPUs, each a NCCL host of its own"

echo "PASS: local cluster test in $((SECONDS - T0)) s"
