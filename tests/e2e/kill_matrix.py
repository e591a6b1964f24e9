#!/usr/bin/env python3
"""The kill-point matrix's plan and summary (tests/e2e/kill_matrix.sh).

plan POINTS SEED: one line per point, "index phase victim delay_ms down_ms budget".
The same seed gives the same plan, so a failing point replays. Points come in
rounds: a round is one point per phase (in a random order, each with a random
victim) followed by the round's other phase x victim pairs, shuffled, so that
ten points cover every phase and fifty cover every pair twice.

summary RESULTS.jsonl [--json FILE] [--meta K=V ...]: counts by phase x victim
and by outcome, the failed points; optionally all of it as JSON."""
import argparse
import glob
import json
import os
import random
import re
import sqlite3
import sys

PHASES = ["submit", "gate", "run", "relaunch", "restart", "continuation", "handoff", "cancel",
          "pool"]
VICTIMS = ["controller", "worker", "rank", "slurmd"]
# Who exists to be killed in each phase: no worker before the allocation
# starts, no rank before the gate says GO.
PHASE_VICTIMS = {
    "submit": ["controller", "slurmd"],
    "gate": ["controller", "worker", "slurmd"],
}
# When the victim dies, in ms after the phase's trigger (cancel: around the
# `trellis cancel`, before it when negative).
DELAY_MS = {
    "submit": (0, 1500),
    "gate": (0, 400),
    "run": (0, 3000),
    "relaunch": (0, 2000),
    "restart": (0, 3000),
    "continuation": (0, 3000),
    "handoff": (0, 1000),
    "cancel": (-1000, 1500),
    "pool": (0, 2000),
}


def victims(phase):
    return PHASE_VICTIMS.get(phase, VICTIMS)


def plan(points, seed):
    rng = random.Random(seed)
    pairs = [(p, v) for p in PHASES for v in victims(p)]
    order = []
    while len(order) < points:
        firsts = [(p, rng.choice(victims(p))) for p in PHASES]
        rng.shuffle(firsts)
        rest = [pv for pv in pairs if pv not in firsts]
        rng.shuffle(rest)
        order.extend(firsts + rest)
    for i, (phase, victim) in enumerate(order[:points], 1):
        lo, hi = DELAY_MS[phase]
        delay = rng.randint(lo, hi)
        down = rng.randint(0, 2000)  # how long a killed daemon stays down
        # A quarter of the faults that can fail a launch meet a run with no
        # restart to spare for them: the run must then end FAILED, not heal.
        budget = int(victim != "controller" and phase != "cancel" and rng.random() < 0.25)
        print(i, phase, victim, delay, down, budget)


def summary(path, json_out, meta):
    points = [json.loads(line) for line in open(path) if line.strip()]
    table = {p: {v: {"pass": 0, "fail": 0} for v in victims(p)} for p in PHASES}
    for pt in points:
        table[pt["phase"]][pt["victim"]]["pass" if pt["pass"] else "fail"] += 1
    width = max(len(p) for p in PHASES)
    print("%-*s %s" % (width, "phase", " ".join("%-11s" % v for v in VICTIMS)))
    for p in PHASES:
        cells = []
        for v in VICTIMS:
            c = table[p].get(v)
            cell = "-" if c is None else "%d/%d" % (c["pass"], c["pass"] + c["fail"])
            cells.append("%-11s" % cell)
        print("%-*s %s" % (width, p, " ".join(cells)))
    print("(cells: passed/points)")
    outcomes = {}
    for pt in points:
        outcomes[pt["state"]] = outcomes.get(pt["state"], 0) + 1
    print("terminal states: " + ", ".join("%s %d" % kv for kv in sorted(outcomes.items())))
    missed = sum(1 for pt in points if not pt["hit"])
    print("victim absent at its moment (invariants still checked): %d" % missed)
    notes = ["point %d (%s/%s): %s" % (pt["point"], pt["phase"], pt["victim"], n)
             for pt in points
             for n in [x for r in pt["runs"].values() for x in r["notes"]] + pt["notes"]]
    if notes:
        print("notes (not invariant violations):\n  " + "\n  ".join(notes))
    failed = [pt for pt in points if not pt["pass"]]
    passed = len(points) - len(failed)
    print("points: %d, passed %d, failed %d" % (len(points), passed, len(failed)))
    for pt in failed:
        print("FAILED point %d (%s/%s, delay %d ms): %s" % (
            pt["point"], pt["phase"], pt["victim"], pt["delay_ms"], "; ".join(pt["violations"])))
    if json_out:
        doc = dict(meta)
        doc.update({"points": len(points), "passed": passed, "failed": len(failed),
                    "by_phase_victim": table, "terminal_states": outcomes,
                    "victim_absent": missed, "notes": notes, "results": points})
        with open(json_out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0 if not failed else 1


def worker_logs(attempt_dir):
    """The batch output of an attempt: every worker of every launch logs there."""
    return sorted(glob.glob(os.path.join(attempt_dir, "slurm-*.out")))


def acked_records(attempt_dir, exits):
    """(acked, unstored) step records of the attempt's workers, from their logs:
    a lower bound of what the controller acknowledged to them, and what they
    logged as not stored at exit. A worker logs what it received from its
    ranks, flushes its stream (Close), logs what was not stored (the line may
    come twice: Close runs again in the destructor) and, when its stream
    broke, what was stored; then it reports its exit (the controller logs
    "worker on N exited"; EXITS counts those lines). When every worker that
    logged its count also reported its exit, every Close finished: acked is
    at least what they received less every "not stored" line. Otherwise (a
    worker killed during Close) only the "stored" counts are sure."""
    received = unstored = dropped = refused = stored = summaries = 0
    for path in worker_logs(attempt_dir):
        for line in open(path, errors="replace"):
            m = re.search(r"; (\d+) step record\(s\), \d+ bad line\(s\) from the ranks", line)
            if m:
                received += int(m.group(1))
                summaries += 1
            m = re.search(r"(\d+) step record\(s\) not stored by the controller at exit", line)
            if m:
                unstored += int(m.group(1))
            m = re.search(r"step records: (\d+) stored, (\d+) dropped .*, (\d+) refused", line)
            if m:
                stored += int(m.group(1))
                dropped += int(m.group(2))
                refused += int(m.group(3))
    acked = stored
    if summaries and summaries == exits:
        acked = max(acked, received - unstored - dropped - refused)
    return acked, unstored


def rank_starts(attempt_dir):
    """{(launch, rank): starts}: from the workers' "rank R started" lines."""
    starts = {}
    pat = re.compile(r"rank (\d+) started, pid \d+, log .*/launch-(\d+)/rank-\d+\.log")
    for path in worker_logs(attempt_dir):
        for line in open(path, errors="replace"):
            m = pat.search(line)
            if m:
                key = (int(m.group(2)), int(m.group(1)))
                starts[key] = starts.get(key, 0) + 1
    return starts


def check_run(a):
    """Violations of the matrix's invariants by one run (see kill_matrix.sh)."""
    db = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True, timeout=10)
    v, notes = [], []
    row = db.execute("SELECT state, state_reason, restarts, spec_toml FROM runs WHERE run_id=?",
                     (a.id,)).fetchone()
    if row is None:
        return {"violations": ["run %s is not in the store" % a.id], "notes": []}
    state, reason, restarts, spec = row
    m = re.search(r"max_restarts = (\d+)", spec)
    max_restarts = int(m.group(1)) if m else 0
    attempts = db.execute("SELECT attempt, slurm_job_id, launches FROM attempts WHERE run_id=? "
                          "ORDER BY attempt", (a.id,)).fetchall()
    launches = db.execute("SELECT attempt, launch, failure_class FROM launches WHERE run_id=? "
                          "ORDER BY attempt, launch", (a.id,)).fetchall()
    # The terminal state matches what happened.
    if a.cancelled:
        if state != "CANCELLED":
            v.append("the cancel was acknowledged but the run is %s (%s)" % (state, reason))
    elif state not in ("SUCCEEDED", "FAILED"):
        v.append("ended %s (%s), expected SUCCEEDED or FAILED" % (state, reason))
    if restarts > a.faults:
        v.append("%d restart(s) used, but only %d fault(s) injected" % (restarts, a.faults))
    if state == "FAILED" and not (reason and restarts >= max_restarts and a.faults > max_restarts):
        v.append("FAILED with %d of %d restarts used and %d fault(s) injected: %s"
                 % (restarts, max_restarts, a.faults, reason or "(no reason)"))
    # No attempt has two Slurm jobs (jobs of this run seen by sacct and squeue).
    jobs = {}
    for line in open(a.jobs):
        if "|" in line:
            job, name = line.strip().split("|")[:2]
            # "trellis-<run>.<attempt>.<tag>": grouped by attempt, whatever the tag.
            name = re.sub(r"\.[0-9a-f]{8}$", "", name)
            jobs.setdefault(name, set()).add(job.split("_")[0].split(".")[0])
    for attempt, job, _ in attempts:
        seen = jobs.get("trellis-%s.%d" % (a.id, attempt), set())
        if len(seen) > 1:
            v.append("attempt %d has %d Slurm jobs: %s"
                     % (attempt, len(seen), ",".join(sorted(seen))))
        if job and seen and job not in seen:
            v.append("attempt %d stored job %s, Slurm knows %s" % (attempt, job, ",".join(seen)))
        outs = worker_logs(os.path.join(a.run_dir, "attempt-%d" % attempt))
        if len(outs) > 1:
            v.append("attempt %d has batch output of %d jobs: %s"
                     % (attempt, len(outs), " ".join(os.path.basename(o) for o in outs)))
    # No launch starts twice: the workers' logs, the ranks' own logs, the store.
    for attempt, _, n in attempts:
        adir = os.path.join(a.run_dir, "attempt-%d" % attempt)
        for (launch, rank), count in sorted(rank_starts(adir).items()):
            if count > 1:
                v.append("attempt %d launch %d: rank %d started %d times"
                         % (attempt, launch, rank, count))
        for log in glob.glob(os.path.join(adir, "launch-*", "rank-*.log")):
            count = sum(1 for line in open(log, errors="replace")
                        if re.match(r"rank \d+ pid ", line))
            if count > 1:
                v.append("%s: the rank started %d times" % (os.path.relpath(log, a.run_dir), count))
        stored = [l for (at, l, _) in launches if at == attempt]
        if stored != list(range(1, len(stored) + 1)) or (stored and n != len(stored)):
            v.append("attempt %d: launches stored %s, attempt says %d" % (attempt, stored, n))
    # No step record the controller acknowledged is missing.
    steps = db.execute("SELECT attempt, launch, step, ranks FROM steps WHERE run_id=? "
                       "ORDER BY attempt, launch, step", (a.id,)).fetchall()
    records = {}
    controller_log = open(a.controller_log, errors="replace").read()
    for attempt, _, _ in attempts:
        exits = len(re.findall(r"run %s attempt %d launch \d+: worker on \S+ exited"
                               % (re.escape(a.id), attempt), controller_log))
        acked, lost = acked_records(os.path.join(a.run_dir, "attempt-%d" % attempt), exits)
        have = sum(r for (at, _, _, r) in steps if at == attempt)
        records[attempt] = {"stored": have, "acked_by_workers": acked, "not_stored_at_exit": lost}
        if have < acked:
            v.append("attempt %d: %d step records stored, the workers had %d acknowledged"
                     % (attempt, have, acked))
        if lost:
            notes.append("attempt %d: workers logged %d step record(s) not stored at exit"
                         % (attempt, lost))
    by_launch = {}
    for at, l, s, r in steps:
        by_launch.setdefault((at, l), []).append((s, r))
    for (at, l), rows in sorted(by_launch.items()):
        nums = [s for s, _ in rows]
        if nums != list(range(nums[0], nums[-1] + 1)):
            v.append("attempt %d launch %d: steps %d..%d have gaps" % (at, l, nums[0], nums[-1]))
    # A SUCCEEDED run has every step, its last launch's from every rank: a
    # worker keeps each batch until stored and sends it again after a broken
    # stream, "so a restarting controller costs no record" (step_stream.h),
    # and no controller of the matrix stays down for longer than a worker's
    # flush at exit (10 s).
    if state == "SUCCEEDED":
        if not by_launch:
            v.append("SUCCEEDED without a step record")
        else:
            last = max(by_launch)
            rows = by_launch[last]
            short = [s for s, r in rows if r != a.world]
            if rows[-1][0] != a.steps or short:
                v.append("the last launch %d.%d ends at step %d (of %d); steps not from all %d "
                         "ranks: %s" % (last[0], last[1], rows[-1][0], a.steps, a.world, short[:5]))
            distinct = {s for (_, _, s, _) in steps}
            if distinct != set(range(1, a.steps + 1)):
                missing = sorted(set(range(1, a.steps + 1)) - distinct)
                v.append("the run's steps miss %s" % missing[:10])
    if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
        open_launches = db.execute("SELECT attempt, launch FROM launches WHERE run_id=? AND "
                                   "(ended_ms IS NULL OR failure_class='')", (a.id,)).fetchall()
        for at, l in open_launches:
            notes.append("launch %d.%d of a %s run never settled" % (at, l, state))
    classes = ["%d.%d:%s" % (at, l, c or "-") for at, l, c in launches]
    return {"state": state, "reason": reason, "restarts": restarts,
            "max_restarts": max_restarts, "attempts": len(attempts),
            "jobs": sorted({j for n, s in jobs.items() if n.startswith("trellis-%s." % a.id)
                            for j in s}),
            "records": records,
            "launches": classes, "steps": len(steps), "violations": v, "notes": notes}


def result(fields):
    """One point's JSON line from POINT_DIR (checks/*.json, violations.txt)
    and KEY=VALUE fields; prints it, then a line for people on stderr."""
    pdir, kv = fields[0], dict(f.split("=", 1) for f in fields[1:])
    pt = {"point": int(kv.pop("point")), "phase": kv.pop("phase"), "victim": kv.pop("victim"),
          "delay_ms": int(kv.pop("delay_ms")), "down_ms": int(kv.pop("down_ms")),
          "budget": kv.pop("budget") == "1", "hit": kv.pop("hit", ""),
          "seconds": int(kv.pop("seconds", "0"))}
    pt.update(kv)
    vio_file = os.path.join(pdir, "violations.txt")
    violations = [l.strip() for l in open(vio_file)] if os.path.exists(vio_file) else []
    runs = {}
    for path in sorted(glob.glob(os.path.join(pdir, "checks", "*.json"))):
        run = json.load(open(path))
        runs[os.path.basename(path)[:-5]] = run
        violations += ["%s: %s" % (os.path.basename(path)[:-5], x) for x in run["violations"]]
    pt["runs"] = runs
    notes_file = os.path.join(pdir, "notes.txt")
    pt["notes"] = [l.strip() for l in open(notes_file)] if os.path.exists(notes_file) else []
    pt["state"] = ",".join(r["state"] for r in runs.values()) or "none"
    pt["violations"] = [x for x in violations if x]
    pt["pass"] = not pt["violations"]
    print(json.dumps(pt))
    detail = "; ".join("%s %s restarts %d/%d attempts %d launches %s" % (
        i, r["state"], r["restarts"], r["max_restarts"], r["attempts"], " ".join(r["launches"]))
        for i, r in runs.items())
    notes = ["%s: %s" % (i, n) for i, r in runs.items() for n in r["notes"]] + pt["notes"]
    sys.stderr.write("point %d %s/%s delay %d ms: killed %s; %s; %s%s (%d s)\n" % (
        pt["point"], pt["phase"], pt["victim"], pt["delay_ms"], pt["hit"] or "nothing (absent)",
        detail or "no run acknowledged", "PASS" if pt["pass"] else
        "FAIL: " + "; ".join(pt["violations"]),
        "".join("\n  note: " + n for n in notes), pt["seconds"]))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("points", type=int)
    p.add_argument("seed", type=int)
    c = sub.add_parser("check")
    for flag in ("--db", "--id", "--run-dir", "--jobs", "--controller-log"):
        c.add_argument(flag, required=True)
    for flag in ("--steps", "--world", "--faults"):
        c.add_argument(flag, type=int, required=True)
    c.add_argument("--cancelled", action="store_true")
    r = sub.add_parser("result")
    r.add_argument("fields", nargs="*")
    s = sub.add_parser("summary")
    s.add_argument("results")
    s.add_argument("--json")
    s.add_argument("--meta", action="append", default=[])
    a = ap.parse_args()
    if a.cmd == "plan":
        plan(a.points, a.seed)
        return 0
    if a.cmd == "check":
        print(json.dumps(check_run(a)))
        return 0
    if a.cmd == "result":
        return result(a.fields)
    meta = dict(kv.split("=", 1) for kv in a.meta)
    return summary(a.results, a.json, meta)


if __name__ == "__main__":
    sys.exit(main())
