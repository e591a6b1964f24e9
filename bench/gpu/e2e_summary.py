#!/usr/bin/env python3
"""Summarizes a bench/gpu/e2e.sh run into PREFIX.md and PREFIX.json.

usage: e2e_summary.py WORK PREFIX COMMAND NGPU WARMUP "RUNS" [GPUS]

NGPU is the number of nodes (one rank each), GPUS the GPUs they ran on
(default NGPU; 1 when e2e.sh's SHARE_ONE_GPU=1 put every node on one GPU,
and the rates are then per rank).

Reads what e2e.sh left in WORK: host.txt, alone/rank*.jsonl (trellis-train's
step records), and per controller run NAME/: watch.jsonl (`trellis watch
--json`), show.json, gate.json, killed. Tokens/s per GPU are the median over
the steps after WARMUP of (tokens of all ranks) / (slowest rank's step time)
/ NGPU, the same formula for the baseline and for what the controller
reported. JSON keys are stable.
"""
import glob
import json
import os
import statistics
import sys

GIB = 1024 ** 3


def load_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def load_json(path):
    try:
        return json.load(open(path))
    except (OSError, json.JSONDecodeError):
        return None


def median_rate(per_step, ngpu, warmup):
    """per_step: {step: (tokens, seconds)} with every rank in."""
    rates = [t / s / ngpu for step, (t, s) in sorted(per_step.items()) if step > warmup and s > 0]
    return (statistics.median(rates), len(rates)) if rates else (None, 0)


def alone(work, name, ngpu, warmup):
    ranks = [load_jsonl(f) for f in sorted(glob.glob(os.path.join(work, name, "rank*.jsonl")))]
    if not ranks or not all(ranks):
        return None
    per_step = {}
    for recs in ranks:
        for r in recs:
            t, s = per_step.get(r["step"], (0, 0.0))
            per_step[r["step"]] = (t + r["tokens"], max(s, r["step_seconds"]))
    full = {k: v for k, v in per_step.items() if k in set.intersection(*[{r["step"] for r in x} for x in ranks])}
    rate, n = median_rate(full, ngpu, warmup)
    last = [recs[-1] for recs in ranks]
    return {
        "devices": device_lines(glob.glob(os.path.join(work, name, "rank*.err"))),
        "tokens_per_s_per_gpu": rate,
        "steps_measured": n,
        "ranks": [rank_figures(i, r) for i, r in enumerate(last)],
    }


def device_lines(paths):
    """Each rank's start-up line naming its device (GPU, PCI bus id, CUDA_VISIBLE_DEVICES)."""
    out = []
    for f in sorted(paths):
        out += [l.strip() for l in open(f, errors="replace") if " on GPU " in l or " on the CPU" in l][:1]
    return out


def rank_figures(rank, rec):
    def gib(k):
        return round(rec[k] / GIB, 2) if rec.get(k) is not None else None
    return {
        "rank": rank,
        "step": rec.get("step"),
        "alloc_retries": rec.get("alloc_retries"),
        "reserved_peak_gib": gib("mem_reserved_peak_bytes"),
        "allocated_peak_gib": gib("mem_allocated_peak_bytes"),
        "nccl_ctas": rec.get("nccl_max_ctas"),
    }


def controller_run(work, name, ngpu, warmup):
    d = os.path.join(work, name)
    show = load_json(os.path.join(d, "show.json"))
    if show is None:
        return None
    watch = load_jsonl(os.path.join(d, "watch.jsonl"))
    steps = {}  # (attempt, launch, step) -> the summary with the most ranks
    for e in watch:
        s = e.get("step")
        if s:
            k = (s["attempt"], s["launch"], s["step"])
            if k not in steps or s["ranks"] >= steps[k]["ranks"]:
                steps[k] = s
    # The first launch; after a failure the run goes on in a relaunch inside
    # the same Slurm job (a later launch) or in a new attempt.
    first = min(((k[0], k[1]) for k in steps), default=(1, 1))
    per_step = {k[2]: (s["tokens"], s["step_seconds"]) for k, s in steps.items()
                if (k[0], k[1]) == first and s["ranks"] == ngpu}
    rate, n = median_rate(per_step, ngpu, warmup)
    submitted = float(open(os.path.join(d, "submitted_at")).read()) if os.path.exists(
        os.path.join(d, "submitted_at")) else None
    events = [{"to": e["to"], "at_s": round(e["unix_ms"] / 1000 - submitted, 1) if submitted else None,
               "reason": e.get("reason", "")} for e in show.get("events", [])]
    # Per rank: the controller's latest record of each rank, if it keeps them;
    # else the latest rank record of the last step.
    ranks = []
    for r in show.get("ranks", []) or []:
        ranks.append(dict(rank_figures(r.get("rank"), r.get("record", r)), node=r.get("node")))
    if not ranks and show.get("recent_steps"):
        last = show["recent_steps"][-1].get("last")
        if last:
            ranks = [dict(rank_figures(None, last), note="the latest rank record only")]
    attempts = [{"attempt": a["attempt"], "exit_code": a["exit_code"], "end_reason": a["end_reason"],
                 "nodes": a["nodes"]} for a in show.get("attempts", [])]
    launches = [{k: l.get(k) for k in ("attempt", "launch", "failure_class", "blamed_node",
                                       "recovery", "reason")} for l in show.get("launches", [])]
    out = {
        "devices": device_lines(glob.glob(os.path.join(d, "attempt-1", "launch-1", "rank-*.log"))),
        "run_id": show.get("run_id"),
        "state": show.get("state"),
        "last_step": show.get("last_step"),
        "events": events,
        "attempts": attempts,
        "launches": launches,
        "tokens_per_s_per_gpu": rate,
        "steps_measured": n,
        "ranks": ranks,
    }
    # Every checkpoint written, by every launch's ranks (the trainer's note).
    out["checkpoint_writes"] = [
        f"{os.sep.join(f.split(os.sep)[-3:-1])} {os.path.basename(f)[:-4]}: {l.strip()}"
        for f in sorted(glob.glob(os.path.join(d, "attempt-*", "launch-*", "rank-*.log")))
        for l in open(f, errors="replace") if "checkpoint step" in l and " written in " in l]
    if os.path.exists(os.path.join(d, "killed")):
        killed = open(os.path.join(d, "killed")).read().split()
        out["killed_at_s"] = round(float(killed[0]) - submitted, 1) if submitted else None
        later = [k[2] for k in steps if (k[0], k[1]) > first]
        out["resumed_first_step"] = min(later) if later else None
        # The ranks' logs after the kill (every launch but the first).
        relaunched = [f for f in sorted(glob.glob(os.path.join(d, "attempt-*", "launch-*", "rank-*.log")))
                      if os.sep.join(f.split(os.sep)[-3:-1]) != os.path.join("attempt-1", "launch-1")]
        out["resume_line"] = next((l.strip() for f in relaunched if f.endswith("rank-0.log")
                                   for l in open(f, errors="replace") if "starting at step" in l), None)
        # Every relaunched rank's checkpoint read (the trainer's note).
        out["checkpoint_reads"] = [f"{os.path.basename(f)[:-4]}: {l.strip()}" for f in relaunched
                                   for l in open(f, errors="replace")
                                   if "checkpoint step" in l and " read in " in l]
    gate = load_json(os.path.join(d, "gate.json"))
    if gate is not None:
        out["gate"] = gate
    return out


def fmt(v, f="{:.0f}"):
    return "-" if v is None else f.format(v)


def main():
    work, prefix, command, ngpu, warmup, runs = sys.argv[1:7]
    ngpu, warmup = int(ngpu), int(warmup)
    gpus = int(sys.argv[7]) if len(sys.argv) > 7 else ngpu
    shared = gpus < ngpu
    host = open(os.path.join(work, "host.txt")).read() if os.path.exists(os.path.join(work, "host.txt")) else ""
    result = {"date": host.split("\n", 1)[0].replace("date: ", ""), "command": command, "ngpu": ngpu,
              "gpus": gpus, "nodes_share_gpus": shared,
              "warmup_steps": warmup, "host": host.strip().splitlines(), "runs": {}}
    for name in runs.split():
        r = alone(work, name, ngpu, warmup) if name.startswith("alone") else controller_run(work, name, ngpu, warmup)
        result["runs"][name] = r
    bases = [r["tokens_per_s_per_gpu"] for n, r in result["runs"].items()
             if n.startswith("alone") and r and r.get("tokens_per_s_per_gpu")]
    base = statistics.mean(bases) if bases else None
    result["alone_tokens_per_s_per_gpu_mean"] = base
    via = (result["runs"].get("ctas16") or {}).get("tokens_per_s_per_gpu")
    result["controller_cost"] = (1 - via / base) if base and via else None
    json.dump(result, open(prefix + ".json", "w"), indent=1, sort_keys=True)

    per = "per rank" if shared else "per GPU"
    where = f"{ngpu} nodes sharing {gpus} GPU{'s' if gpus > 1 else ''}" if shared else \
        f"{ngpu} GPU{'s' if ngpu > 1 else ''}"
    md = [f"# The production path on {where}: controller, Slurm, workers ({result['date'][:10]})", "",
          f"Command: `{command}` (one call on the GPU machine; the packages it needs were staged with "
          "`deploy/gpu/stage-prefix.sh`).", "", "## Host", "", "```"] + result["host"] + ["```", ""]
    md += ["## Throughput: through the controller vs trellis-train alone", "",
           f"Median over the steps after {warmup} of (tokens of all ranks) / (slowest rank's step time) / {ngpu}.", "",
           f"| run | how | tokens/s {per} | steps | NCCL CTAs (per rank) | alloc retries | reserved GiB (per rank) |",
           "|---|---|---|---|---|---|---|"]
    how = {"alone": "trellis-train per GPU, NCCL_MAX_CTAS=16", "alone2": "the same, after the others", "ctas16": "controller + workers (NCCL_MAX_CTAS=16)",
           "ctas_default": "controller + workers, NCCL's own CTAs", "kill": "controller, a rank killed"}
    for name, r in result["runs"].items():
        if not r:
            md.append(f"| {name} | {how.get(name, '')} | failed | | | | |")
            continue
        ranks = r.get("ranks", [])
        md.append(f"| {name} | {how.get(name, '')} | {fmt(r['tokens_per_s_per_gpu'])} | {r['steps_measured']} | "
                  f"{', '.join(fmt(x.get('nccl_ctas')) for x in ranks)} | "
                  f"{', '.join(fmt(x.get('alloc_retries')) for x in ranks)} | "
                  f"{', '.join(fmt(x.get('reserved_peak_gib'), '{:.1f}') for x in ranks)} |")
    if shared:
        md += ["", f"The {ngpu} nodes share {gpus} GPU{'s' if gpus > 1 else ''} (local-cluster --share-gpus): each "
               "node's ranks are a NCCL host of their own (`NCCL_HOSTID`) and meet over NCCL's socket "
               "transport on loopback, as the `alone` ranks do. Process groups, collectives, the "
               "workers, Slurm and the controller are those of a run on as many GPUs; speed is not: "
               "the ranks take turns on one GPU and their collectives go through host memory, so "
               f"tokens/s are {per} and say nothing of {ngpu} GPUs. The controller's cost compares "
               "runs made the same way."]
    elif ngpu == 1:
        md += ["", "One GPU: a world of one rank builds no NCCL communicator, so there are no NCCL CTAs "
               "to report and `ctas_default` is not run; the 2-GPU run has them."]
    c = result["controller_cost"]
    md += ["", f"Cost of the controller path (ctas16) vs alone (mean of {len(bases)} baseline runs, "
           f"{fmt(base)} tokens/s {per}): {fmt(c * 100 if c is not None else None, '{:.2f}')}% "
           "(target < 2%).", "", "## Each rank's device (its start-up line)", ""]
    for name, r in result["runs"].items():
        for line in (r or {}).get("devices", []):
            md.append(f"- {name}: `{line}`")
    md.append("")
    md += ["## States and times (seconds after submit)", ""]
    for name, r in result["runs"].items():
        if not r or name.startswith("alone"):
            continue
        path = " -> ".join(f"{e['to']} {fmt(e['at_s'], '{:.1f}')}" for e in r["events"])
        md.append(f"- {name} ({r['run_id']}): {path}; attempts: "
                  + "; ".join(f"#{a['attempt']} exit {a['exit_code']} on {','.join(a['nodes'])}" for a in r["attempts"]))
        if "killed_at_s" in r:
            then = "; ".join(f"launch {l['attempt']}.{l['launch']}: {l['failure_class']} -> {l['recovery']}"
                             for l in r.get("launches", []) if l.get("recovery") != "succeed")
            md.append(f"  - rank killed at {r['killed_at_s']} s ({then}); first step after it {r['resumed_first_step']}; "
                      f"rank 0 said: `{r['resume_line']}`")
            for line in r.get("checkpoint_reads", []):
                md.append(f"  - {line}")
        for line in r.get("checkpoint_writes", []):
            md.append(f"  - {line}")
    md += ["", "## The gate's report of this host (`trellis gate-report`)", "",
           "Each node's worker probed this host's real /sys (local-cluster --host-sysfs); the JSON beside "
           "this file has every figure.", "", "```"]
    for name in result["runs"]:
        text = os.path.join(work, name, "gate.txt")
        if not name.startswith("alone") and os.path.exists(text):
            md += open(text).read().rstrip().splitlines()
            break
    md += ["```", ""]
    for name in ("ctas16", "kill"):
        for view, title in (("show.txt", "trellis show"), ("watch.txt", "trellis watch (last lines)")):
            path = os.path.join(work, name, view)
            if os.path.exists(path):
                lines = open(path, errors="replace").read().rstrip().splitlines()
                if view == "watch.txt":
                    lines = lines[-8:]
                md += [f"## {name}: `{title}`", "", "```"] + lines[:80] + ["```", ""]
    open(prefix + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md[:40]))


if __name__ == "__main__":
    main()
