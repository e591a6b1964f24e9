#!/usr/bin/env python3
"""The bench's fault injector, one per variant: follows one run in its
controller's database (read only) and injects the faults of the schedule
(schedule.json, written by run.sh, the same for every variant) as the run's
running time reaches them.

The clock is the run's running time (the seconds its controller shows it
RUNNING), not the wall clock: nodes fail per hour of use, so every variant
meets its k-th fault after as much running as the others, whatever its queue
waits and restarts cost it. A fault that comes due while no rank of the run
trains (between launches, or before the launch's first step record) waits for
the next launch's first step: faults hit training, not start-up (a generic
rank that hangs before its first step record is judged by no timeout, since
a generic command need not report steps; only the time limit would end it).

Kinds, in the schedule's order:
  rank_kill    SIGKILL of rank R (a rank process dies: the launch fails);
  worker_kill  SIGKILL of the trellis-worker that runs rank R (its ranks die
               with it: PR_SET_PDEATHSIG; the node is lost to the launch);
  hang         SIGSTOP of rank R (it stops reporting steps: a hang, seen
               after restart.hang_timeout_s).
Each injected fault is one JSON line in --log: its number, kind, rank, the
pid and node hit, the attempt and launch, the wall time and running time."""
import argparse
import json
import os
import signal
import sqlite3
import sys
import time

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def stat(pid):
    """(state, ppid) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def rank_process(run_id, work_dir, rank_script, rank):
    """The running (not stopped) process of rank `rank` of the run's newest
    launch: (pid, env), or None."""
    best = None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if rank_script.encode() not in cmd:
            continue
        env = environ(pid)
        if not env or env.get("TRELLIS_RUN") != run_id or env.get("RANK") != str(rank):
            continue
        if not env.get("TRELLIS_CHECKPOINT_DIR", "").startswith(work_dir + "/"):
            continue  # another variant's run of the same id
        st = stat(pid)
        if st is None or st[0] in ("T", "t", "Z", "X"):
            continue
        key = (int(env.get("TRELLIS_ATTEMPT", "0")), int(env.get("TRELLIS_LAUNCH", "0")))
        if best is None or key > best[0]:
            best = (key, pid, env)
    return (best[1], best[2]) if best else None


def query(db, sql, args):
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
        try:
            return con.execute(sql, args).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None


def run_state(db, run_id):
    row = query(db, "SELECT state FROM runs WHERE run_id = ?", (run_id,))
    return row[0] if row else None


def launch_stepped(db, run_id, attempt, launch):
    """Whether the launch has stored a step record."""
    return query(db, "SELECT 1 FROM steps WHERE run_id = ? AND attempt = ? AND launch = ? LIMIT 1",
                 (run_id, attempt, launch)) is not None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--work-dir", required=True, help="the variant's directory (its output root's parent)")
    ap.add_argument("--rank-script", required=True)
    ap.add_argument("--schedule", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--tick-s", type=float, default=0.5)
    a = ap.parse_args()
    faults = json.load(open(a.schedule))["faults"]
    work_dir = os.path.realpath(a.work_dir)
    running_s = 0.0
    last = time.monotonic()
    k = 0
    out = open(a.log, "a")
    while True:
        time.sleep(a.tick_s)
        now = time.monotonic()
        state = run_state(a.db, a.run)
        if state == "RUNNING":
            running_s += now - last
        last = now
        if state in TERMINAL:
            print("inject %s: run %s, %d fault(s) injected" % (a.run, state.lower(), k), flush=True)
            return 0
        if k >= len(faults) or running_s < faults[k]["at_running_s"] or state != "RUNNING":
            continue
        f = faults[k]
        found = rank_process(a.run, work_dir, a.rank_script, f["rank"])
        if not found:
            continue  # no rank up yet: the fault waits for one
        pid, env = found
        if not launch_stepped(a.db, a.run, int(env.get("TRELLIS_ATTEMPT", "0")),
                              int(env.get("TRELLIS_LAUNCH", "0"))):
            continue  # not training yet
        target, sig = pid, signal.SIGKILL
        what = "rank %d" % f["rank"]
        if f["kind"] == "worker_kill":
            st = stat(pid)
            if not st or comm(st[1]) != "trellis-worker":
                continue
            target, what = st[1], "the worker of rank %d" % f["rank"]
        elif f["kind"] == "hang":
            sig = signal.SIGSTOP
        try:
            os.kill(target, sig)
        except OSError:
            continue
        rec = {"fault": k + 1, "kind": f["kind"], "rank": f["rank"], "pid": target,
               "node": env.get("SLURMD_NODENAME", ""), "attempt": int(env.get("TRELLIS_ATTEMPT", "0")),
               "launch": int(env.get("TRELLIS_LAUNCH", "0")), "unix_ms": int(time.time() * 1000),
               "running_s": round(running_s, 1), "scheduled_running_s": f["at_running_s"]}
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print("inject %s: fault %d: %s of %s (pid %d on %s, attempt %d launch %d) at %.0f s running" % (
            a.run, k + 1, f["kind"], what, target, rec["node"], rec["attempt"], rec["launch"],
            running_s), flush=True)
        k += 1


if __name__ == "__main__":
    sys.exit(main())
