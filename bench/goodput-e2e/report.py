#!/usr/bin/env python3
"""goodput-e2e's results: reads each variant's `trellis show --json`
(show.json: the controller's own accounting), its injected faults
(faults.jsonl) and its cluster's queue-wait draws (queue-wait.log) from the
work directory run.sh made, and writes OUT.json (stable keys) and OUT.md."""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import textwrap

DESCRIBE = {
    "on": "continuation = \"ahead\", checkpoints \"auto\" (Young, the controller's MTBF), "
          "relaunch in the allocation, 1 spare node, spare pool of 1 where the build knows it",
    "off": "continuation = \"after\", a checkpoint every fixed interval, relaunch in the "
           "allocation, 1 spare node, no pool",
    "plain": "plain resubmission: relaunch_in_allocation = false, continuation = \"after\", "
             "fixed checkpoints, no spare, no pool (every fault is a new Slurm job)",
}
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def machine():
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"cpu_model": cpu, "cores": os.cpu_count(), "mem_gib": mem_gib,
            "kernel": platform.release()}


def git_commit(repo):
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def binaries(bin_dir):
    """When the controller binary was built (its mtime) and its version: the
    repository's commit need not be the one the binaries were built from."""
    if not bin_dir:
        return {}
    path = os.path.join(bin_dir, "trellis-controller")
    out = {}
    try:
        out["controller_built"] = datetime.datetime.utcfromtimestamp(
            os.path.getmtime(path)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out["version"] = subprocess.run([path, "--version"], capture_output=True, text=True,
                                        timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def variant(work, v):
    d = json.load(open(os.path.join(work, v, "show.json")))
    faults = [json.loads(l) for l in open(os.path.join(work, v, "faults.jsonl")) if l.strip()]
    draws = []
    qlog = os.path.join(work, v, "queue-wait.log")
    if os.path.exists(qlog):
        draws = [int(w) for w in re.findall(r" submit draw=\d+ .* wait_s=(\d+) ", open(qlog).read())]
    end_ms = d["updated_unix_ms"]
    for e in d["events"]:
        if e["to"] in TERMINAL:
            end_ms = e["unix_ms"]
    launches = d["launches"]
    classes = {}
    for l in launches:
        c = l["failure_class"] or "running"
        classes[c] = classes.get(c, 0) + 1
    ran = [a for a in d["attempts"] if a["launches"] > 0]
    ss = d["state_seconds"]
    total = sum(ss.values())
    ckpt_events = [e for e in d["health_events"] if e["kind"] == "checkpoint_interval"]
    every = []
    for e in ckpt_events:
        try:
            every.append(json.loads(e["detail_json"])["every_steps"])
        except (ValueError, KeyError):
            pass
    return {
        "run_id": d["run_id"],
        "final_state": d["state"],
        "effective_pct": round(100 * d["goodput_ratio"], 2),
        "wall_s": round((end_ms - d["created_unix_ms"]) / 1000, 1),
        "accounted_s": round(total, 1),
        "state_seconds": {k: round(v, 1) for k, v in ss.items()},
        "running_s": round(ss.get("running", 0), 1),
        "redone_s": round(ss.get("redone", 0), 1),
        "restarting_s": round(ss.get("restarting", 0), 1),
        "handoff_s": round(ss.get("handoff", 0), 1),
        "gating_s": round(ss.get("gating", 0), 1),
        "queue_wait_s": round(ss.get("queued", 0), 1),
        "attempts": len(ran),
        "slurm_jobs": len([a for a in d["attempts"] if a["slurm_job_id"]]),
        "launches": len(launches),
        "relaunches": d["relaunches"],
        "restarts": d["restarts"],
        "handoffs": classes.get("handoff", 0),
        "time_limit_stops": classes.get("time_limit", 0),
        "launch_classes": classes,
        "faults_injected": len(faults),
        "faults": [{"fault": f["fault"], "kind": f["kind"], "rank": f["rank"], "node": f["node"],
                    "attempt": f["attempt"], "launch": f["launch"], "running_s": f["running_s"]}
                   for f in faults],
        "last_step": d["last_step"],
        # Among the newest health events `trellis show` returns (20), not all.
        "checkpoint_interval_events_shown": len(ckpt_events),
        "checkpoint_every_steps_chosen": sorted(set(every)),
        "checkpoint_mtbf_s_seen": sorted(set(round(json.loads(e["detail_json"]).get("mtbf_s", 0))
                                             for e in ckpt_events)),
        "queue_wait_draws_s": draws,
    }


def fmt_s(s):
    s = float(s)
    return "%d:%02d" % (s // 60, s % 60) if s >= 60 else "%.0f s" % s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--variants", required=True)
    ap.add_argument("--out", required=True, help="path without .md/.json")
    ap.add_argument("--command", required=True)
    ap.add_argument("--pool-note", default="")
    ap.add_argument("--config", required=True, help="JSON: the bench's settings")
    ap.add_argument("--bin", default="", help="the binaries' directory (TRELLIS_BIN)")
    a = ap.parse_args()
    cfg = json.loads(a.config)
    names = a.variants.split()
    vs = {v: variant(a.work, v) for v in names}
    schedule = json.load(open(os.path.join(a.work, "schedule.json")))
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    result = {
        "bench": "goodput-e2e",
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(repo),
        "binaries": binaries(a.bin),
        "machine": machine(),
        "command": a.command,
        "seeds": {"faults": cfg["seed"], "queue_wait": cfg["seed"]},
        "config": cfg,
        "spare_pool": a.pool_note,
        "fault_schedule": schedule["faults"][:max([v["faults_injected"] for v in vs.values()] + [0])],
        "variants": vs,
    }
    with open(a.out + ".json", "w") as f:
        json.dump(result, f, indent=1, sort_keys=False)
        f.write("\n")

    m = result["machine"]
    L = []
    L.append("# goodput-e2e on the local Slurm cluster, %s" % result["date"])
    L.append("")
    b = result["binaries"]
    L.append("Machine: %s, %s cores, %s GiB. Scripts at commit %s%s. Command (from the repository "
             "root):" % (m["cpu_model"], m["cores"], m["mem_gib"], result["commit"] or "?",
                         ", trellis-controller %s built %s" % (b.get("version", "?"),
                                                               b["controller_built"])
                         if "controller_built" in b else ""))
    L.append("")
    L.append("    " + a.command)
    L.append("")
    L.append("One run of %d steps of %s s (%s of work), 2 nodes x 2 ranks, a %d-minute time limit "
             "(`signal_grace_s = %d`), a checkpoint costing %s s, each variant on a local cluster of "
             "its own (%d nodes) with queue waits (`local-cluster up --queue-wait %d "
             "--queue-wait-sigma %s --queue-wait-seed %d`), one controller each "
             "(`--node-mtbf-prior-hours %s --quarantine-s %d --probation-s 0`), the three at once. "
             "Faults every ~%d s of each run's running time (seed %d), cycling rank kill, worker "
             "kill, hang (`hang_timeout_s = %d`). Figures are each controller's own accounting "
             "(`trellis show --json`: goodput and state seconds, attempts, launches)." % (
                 cfg["steps"], cfg["step_s"], fmt_s(cfg["work_s"]), cfg["time_limit_min"],
                 cfg["signal_grace_s"], cfg["ckpt_cost_s"], cfg["nodes_per_cluster"],
                 cfg["queue_wait_median_s"], cfg["queue_wait_sigma"], cfg["seed"],
                 cfg["node_mtbf_prior_hours"], cfg["quarantine_s"], cfg["fault_every_s"],
                 cfg["seed"], cfg["hang_timeout_s"]))
    L.append("")
    L.append("| variant | what | final state | effective | wall | running | redone | restarting "
             "| handoff | gating | queued | attempts (jobs) | relaunches | handoffs | time-limit stops "
             "| faults |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for v in names:
        r = vs[v]
        L.append("| %s | %s | %s | %.1f%% | %s | %s | %s | %s | %s | %s | %s | %d (%d) | %d | %d | %d | %d |" % (
            v, DESCRIBE[v], r["final_state"], r["effective_pct"], fmt_s(r["wall_s"]),
            fmt_s(r["running_s"]), fmt_s(r["redone_s"]), fmt_s(r["restarting_s"]),
            fmt_s(r["handoff_s"]), fmt_s(r["gating_s"]), fmt_s(r["queue_wait_s"]),
            r["attempts"], r["slurm_jobs"], r["relaunches"], r["handoffs"],
            r["time_limit_stops"], r["faults_injected"]))
    L.append("")
    L.append("Effective: the controller's `goodput_ratio`, running over everything from submission "
             "to the end (docs/architecture.md, \"Goodput\"); wall: submission to the run's end; "
             "queued: QUEUED and SUBMITTED (the Slurm queue waits a run paid; a job waiting ahead "
             "while the run trains costs none); attempts: Slurm jobs that ran a launch (jobs: "
             "all submitted, those queued ahead and cancelled unused included).")
    L.append("")
    L.append("Spare pool: %s." % (a.pool_note or "-"))
    L.append("")
    L.append("## Launches by how they ended")
    L.append("")
    for v in names:
        r = vs[v]
        L.append("- %s (%s): %s" % (v, r["run_id"], ", ".join(
            "%s %d" % (k, n) for k, n in sorted(r["launch_classes"].items()))))
    L.append("")
    L.append("## Faults injected")
    L.append("")
    L.append("| variant | fault | kind | rank | node | attempt.launch | at running s |")
    L.append("|---|---|---|---|---|---|---|")
    for v in names:
        for f in vs[v]["faults"]:
            L.append("| %s | %d | %s | %d | %s | %d.%d | %.0f |" % (
                v, f["fault"], f["kind"], f["rank"], f["node"], f["attempt"], f["launch"],
                f["running_s"]))
    L.append("")
    L.append("## Queue waits drawn")
    L.append("")
    for v in names:
        d = vs[v]["queue_wait_draws_s"]
        L.append("- %s: %d jobs: %s s" % (v, len(d), ", ".join(str(x) for x in d)))
    if "on" in vs and vs["on"]["checkpoint_interval_events_shown"]:
        r = vs["on"]
        L.append("")
        L.append("Checkpoints \"auto\" (on): the %d choices among the newest 20 health events "
                 "`trellis show` returns: every %s steps, with the controller's MTBF of the "
                 "launch's nodes at %s s." % (
                     r["checkpoint_interval_events_shown"],
                     ", ".join(str(x) for x in r["checkpoint_every_steps_chosen"]),
                     ", ".join(str(x) for x in r["checkpoint_mtbf_s_seen"])))
    L.append("")
    out = []
    for line in L:  # prose wrapped at 100 columns; tables, lists and code as they are
        if line and not line.startswith(("|", "    ", "- ", "#")):
            out.extend(textwrap.wrap(line, 100, break_on_hyphens=False, break_long_words=False))
        elif line.startswith("- ") and len(line) > 100:
            out.extend(textwrap.wrap(line, 100, subsequent_indent="  ", break_on_hyphens=False,
                                     break_long_words=False))
        else:
            out.append(line)
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
