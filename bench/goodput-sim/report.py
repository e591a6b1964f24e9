#!/usr/bin/env python3
"""Turns goodput_sim's JSON into bench/results/goodput-sim-<date>.{md,json} (formatting only)."""
import argparse
import json

TARGET_PCT = 97.0
TARGET_ROW = "trellis_2_spares"
LOST = [("checkpoint_stalls", "checkpoint stalls"), ("redone", "redone work"),
        ("detection", "detection"), ("relaunch", "relaunch"), ("backoff", "restart backoff"),
        ("queue_wait", "queue wait"), ("job_start", "job start"),
        ("after_run_failed", "after the run failed")]
COUNTS = [("node_evidence", "node evidence"), ("no_evidence", "no evidence"), ("hang", "hang"),
          ("repeat_of_faulty_node", "faulty node again"), ("time_limit", "time limit"),
          ("trace_while_not_running", "trace hit nothing")]


def main():
    p = argparse.ArgumentParser()
    for a in ("raw", "md", "json", "date", "cpu", "command"):
        p.add_argument("--" + a, required=True)
    p.add_argument("--cores", type=int, required=True)
    p.add_argument("--wall-s", type=int, required=True)
    # Results of the same scenario and seeds from earlier code, for the
    # findings to compare with; --before-name says where they came from.
    p.add_argument("--before")
    p.add_argument("--before-name", default="")
    a = p.parse_args()
    sim = json.load(open(a.raw))
    rows = {r["key"]: r for r in sim["rows"]}
    before = None
    if a.before:
        old = json.load(open(a.before))
        if old["seeds"] == sim["seeds"] and old["scenario"] == sim["scenario"]:
            before = {"name": a.before_name or a.before,
                      "rows": {r["key"]: r for r in old["rows"]}}
    target = rows.get(TARGET_ROW)
    met = bool(target) and target["effective_pct_min"] >= TARGET_PCT
    doc = {"date": a.date, "machine": {"cores": a.cores, "cpu": a.cpu}, "command": a.command,
           "wall_s": a.wall_s, "seeds": sim["seeds"], "target_effective_pct": TARGET_PCT,
           "target_row": TARGET_ROW, "target_met": met,
           "goodput_check_agrees": all(r["goodput_check_agrees"] for r in sim["rows"]),
           "scenario": sim["scenario"], "rows": sim["rows"]}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(a.md, "w") as f:
        f.write(Markdown(doc, rows, met, before))


def Pct(x):
    return f"{x:.1f}"


def Markdown(doc, rows, met, before):
    s = doc["scenario"]
    seeds = " ".join(str(x) for x in doc["seeds"])
    out = [f"# Goodput under failures: a simulated {s['horizon_days']:.0f}-day run, "
           f"{doc['date']}\n",
           f"Machine: {doc['machine']['cores']} cores, {doc['machine']['cpu']}. Command: "
           f"`{doc['command']}` (seeds {seeds}; {doc['wall_s']} s).\n",
           f"A fake clock drives the controller's own decision code (`controller/core`: "
           f"`ClassifyLaunch` on the evidence each interruption leaves, `DecideRecovery` with its "
           f"`RestartBackoff`, `DecideGate`, `Strike` and `ExcludedNodes`) through a failure trace "
           f"of {s['interruptions']} interruptions in {s['horizon_days']:.0f} days on "
           f"{s['nodes_needed']:,} nodes x {s['ranks_per_node']} GPUs. Effective training time is "
           f"training whose progress was kept, checkpoint stalls excluded, over the whole wall "
           f"time. Every run's ledger was checked against `ComputeGoodput` on the same record "
           f"(queued, gating, running = effective + stalls, redone + restarting, total): "
           f"{'all agree' if doc['goodput_check_agrees'] else 'MISMATCH, see the JSON'}.\n"]
    t = rows.get(TARGET_ROW)
    if t:
        out.append(f"**Target: Trellis with spares >= {TARGET_PCT:.0f}% effective training time: "
                   f"{'met' if met else 'not met'}** ({Pct(t['mean']['effective_pct'])}%, "
                   f"{Pct(t['effective_pct_min'])}-{Pct(t['effective_pct_max'])} over the seeds). "
                   + Why(rows) + "\n")

    out.append(f"## Effective training time and time lost, by cause (% of the wall time, mean of "
               f"{len(doc['seeds'])} seeds)\n")
    head = ["row", "effective % (min-max)", "ComputeGoodput %"] + [n for _, n in LOST]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in doc["rows"]:
        m = r["mean"]
        cells = [Label(r), f"**{Pct(m['effective_pct'])}** ({Pct(r['effective_pct_min'])}-"
                 f"{Pct(r['effective_pct_max'])})", Pct(m["compute_goodput_pct"])]
        cells += [Pct(m["lost_pct"][k]) for k, _ in LOST]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")

    out.append("## Interruptions and what followed (mean per run)\n")
    head = (["row"] + [n for _, n in COUNTS] +
            ["new attempts after a failure", "relaunches", "restarts used", "nodes quarantined"])
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in doc["rows"]:
        m = r["mean"]
        cells = [Label(r)] + [f"{m['interruptions'][k]:.0f}" for k, _ in COUNTS]
        cells += [f"{m[k]:.0f}" for k in ("new_attempts_after_failure", "relaunches",
                                          "restarts_used", "nodes_quarantined")]
        out.append("| " + " | ".join(cells) + " |")
    failed = [r["label"] for r in doc["rows"] if any(x["run_failed"] for x in r["per_seed"])]
    out.append("\n" + ("Runs that used up restart.max_restarts: " + ", ".join(failed) + "."
                       if failed else "No run used up restart.max_restarts.") +
               " \"Trace hit nothing\": interruptions of the trace that came while no launch of"
               " the run was training (queued, starting, relaunching); they hit no node of the"
               " run.\n")

    extra = [r for r in doc["rows"] if r["assumption_change"]]
    if extra:
        out.append("## Extra rows: changed assumptions\n")
        for r in extra:
            out.append(f"- *{r['label']}* (`{r['key']}`): {r['assumption_change']}.")
        out.append("")

    findings = Findings(rows, before, s)
    if findings:
        out.append("## Findings\n")
        out += [f"- {x}" for x in findings]
        out.append("")

    out.append("## Assumptions\n")
    out += [f"- {x}" for x in Assumptions(s)]
    out.append("")
    return "\n".join(out) + "\n"


def Label(r):
    return ("x: " if r["assumption_change"] else "") + r["label"]


def Why(rows):
    """The caps that the extra rows measure, where they ran."""
    parts = []
    calm, bound, cheap = (rows.get(k) for k in ("x_no_interruptions", "x_relaunch_bound",
                                                "x_relaunch_bound_cheaper"))
    if calm:
        m = calm["mean"]["lost_pct"]
        parts.append(f"With no interruption at all the time-limit continuations (each waits the "
                     f"queue and the start again) and the checkpoint stalls leave "
                     f"{Pct(calm['mean']['effective_pct'])}% (queue {Pct(m['queue_wait'])}, "
                     f"start {Pct(m['job_start'])}, stalls {Pct(m['checkpoint_stalls'])}).")
    if bound:
        parts.append(f"With no time limit and every interruption relaunched in place, the "
                     f"scenario's failure costs (detection, redone work, relaunch, stalls) still "
                     f"leave only {Pct(bound['mean']['effective_pct'])}%.")
    if cheap:
        parts.append(f"{Pct(cheap['mean']['effective_pct'])}% takes, on top of that, a 30 s "
                     f"relaunch and a 1 s checkpoint stall every 150 s.")
    return " ".join(parts)


def Findings(rows, before, s):
    """What the rows say about the controller's decisions, where they ran."""
    out = []
    t, nospare, plain = (rows.get(k) for k in (TARGET_ROW, "trellis_no_spares",
                                                "plain_resubmission"))
    if t and nospare and plain:
        m = t["mean"]
        out.append(f"Relaunching in the allocation and quarantining is what pays: plain "
                   f"resubmission {Pct(plain['mean']['effective_pct'])}% (a faulty node comes "
                   f"back and fails again "
                   f"{plain['mean']['interruptions']['repeat_of_faulty_node']:.0f} "
                   f"times), Trellis without spares {Pct(nospare['mean']['effective_pct'])}%, with "
                   f"2 spares {Pct(m['effective_pct'])}%. Two spares do not last: "
                   f"{m['new_attempts_after_failure']:.0f} of the "
                   f"{m['relaunches'] + m['new_attempts_after_failure']:.0f} restarts after a "
                   f"failure were new attempts because the spares were used up, and the queue "
                   f"waits (new attempts and time-limit continuations: "
                   f"{Pct(m['lost_pct']['queue_wait'])}%) are the largest loss.")
    if before and t and TARGET_ROW in before["rows"]:
        out.append(Compared(rows, before))
    many = rows.get("x_16_spares")
    if many:
        n = many["mean"]["new_attempts_after_failure"]
        out.append(f"16 spares {'outlast' if n == 0 else 'mostly outlast'} the strikes between "
                   f"two time limits: "
                   f"{n:.1f} new attempts after a failure a run, "
                   f"{Pct(many['mean']['effective_pct'])}%.")
    nob, never = rows.get("x_backoff_0"), rows.get("x_backoff_never_resets")
    if t and never:
        tb, nb = t["mean"]["lost_pct"]["backoff"], never["mean"]["lost_pct"]["backoff"]
        gain = t["mean"]["effective_pct"] - never["mean"]["effective_pct"]
        out.append(f"The restart backoff costs {Pct(tb)} points in row (3): `RestartBackoff` "
                   f"doubles only with the restarts since the run last trained "
                   f"restart.backoff_reset_s (1 h) in one launch (`BackoffRestarts`, "
                   f"controller/core/recovery.cc), and max_restarts still counts every restart. "
                   f"Doubling with every restart of the run, as before (row "
                   f"x_backoff_never_resets: after the sixth restart every new attempt waits "
                   f"64 x backoff_s, 32 min, before its sbatch), it costs {Pct(nb)} points and "
                   f"leaves {Pct(never['mean']['effective_pct'])}%: the reset gains "
                   f"{Pct(gain)} points"
                   + (f" (restart.backoff_s = 0: {Pct(nob['mean']['effective_pct'])}%)."
                      if nob else "."))
    if many:
        m = many["mean"]
        again = m["interruptions"]["repeat_of_faulty_node"]
        hangs = m["repeats_by_kind"]["hang"]
        out.append(f"Blame under the time limit: `ClassifyLaunch` keeps the blame of a lost "
                   f"worker, of a hung rank the hang detector named, and of a rank ended by a "
                   f"device error or SIGBUS (controller/core/failure_class.h, rule 2), so that "
                   f"node is struck and kept out of the continuation. A failure that the limit "
                   f"cuts is rare here (it must come within the detection time before it), and "
                   f"what still comes back is the \"faulty node again\" of the 16-spares row, "
                   f"{again:.1f} a run, "
                   + ("all of them" if hangs == again else f"{hangs:.1f} of them") +
                   f" hangs: a hang that starts less than the hang timeout "
                   f"({s['hang_timeout_s']} s) before the limit leaves no finding, so no verdict "
                   f"can name its node.")
    unrep = rows.get("x_unrepaired_quarantine")
    if unrep and t:
        out.append(f"If a quarantined node is not repaired while out, the 1 h first quarantine "
                   f"ends before the site repairs it: it comes back and fails again "
                   f"{unrep['mean']['interruptions']['repeat_of_faulty_node']:.0f} times a run, "
                   f"{Pct(unrep['mean']['effective_pct'])}% instead of "
                   f"{Pct(t['mean']['effective_pct'])}% (the controller's --quarantine-s sets "
                   f"the first quarantine).")
    if t:
        out.append(f"`ComputeGoodput` reports {Pct(t['mean']['compute_goodput_pct'])}% for "
                   f"row (3), "
                   f"above the effective {Pct(t['mean']['effective_pct'])}% by the checkpoint "
                   f"stalls, which it counts as running.")
    return out


def Compared(rows, before):
    """The rows against the same rows of `before` (earlier code, same scenario and seeds)."""
    eff = lambda r: r["mean"]["effective_pct"]
    t, b = rows[TARGET_ROW], before["rows"][TARGET_ROW]
    parts = [f"Against `{before['name']}` (earlier code, the same scenario and seeds): row (3) "
             f"{Pct(eff(b))}% -> {Pct(eff(t))}%, its restart backoff "
             f"{Pct(b['mean']['lost_pct']['backoff'])} -> "
             f"{Pct(t['mean']['lost_pct']['backoff'])} points"]
    never = rows.get("x_backoff_never_resets")
    if never:
        parts.append(f"of the {Pct(eff(t) - eff(b))} points, the backoff reset gives "
                     f"{Pct(eff(t) - eff(never))} (row x_backoff_never_resets, the old backoff "
                     f"with today's blame: {Pct(eff(never))}%) and the blame under the time "
                     f"limit {Pct(eff(never) - eff(b))}")
    for key in ("trellis_no_spares", "x_unrepaired_quarantine", "x_16_spares"):
        if key in rows and key in before["rows"]:
            parts.append(f"{rows[key]['label']}: {Pct(eff(before['rows'][key]))}% -> "
                         f"{Pct(eff(rows[key]))}%")
    return "; ".join(parts) + "."


def Assumptions(s):
    h = lambda sec: f"{sec / 3600:g} h"
    return [
        f"Trace: {s['interruptions']} interruptions in {s['horizon_days']:.0f} days, exponential "
        f"gaps scaled so that the last ends at the horizon (a Poisson process given its count), "
        f"one trace per seed shared by every row. An interruption hits a uniformly chosen node "
        f"of the launch training at that moment; one that comes while the run trains nowhere "
        f"(queued, starting, relaunching) hits nothing.",
        f"Kinds: {s['share_node_evidence']:.0%} point at one node (of those 40% an Xid device "
        f"error in a rank's log, 40% a lost worker, 20% a network error on that node's ranks "
        f"only), {s['share_no_evidence']:.0%} have no node evidence (half NCCL timeouts on ranks "
        f"of three nodes, half the same exit code on three nodes), the rest hang (a rank stops "
        f"reporting steps; the hang detector names the hung rank). `ClassifyLaunch` judges "
        f"the evidence; it blames the node for the node-evidence kinds and hangs, nobody else.",
        f"Faulty nodes (the physics): the node an interruption with node evidence or a hang "
        f"came from stays faulty; while it trains in any launch it fails that launch again after "
        f"an exponential time of mean {h(s['repeat_mean_s'])} (same kind). It stops being faulty "
        f"when the controller quarantines it (it is repaired while out; the extra row "
        f"`x_unrepaired_quarantine` drops this), or when the site's own health checks repair it "
        f"{h(s['site_repair_s'])} after its first failure (so that plain resubmission does not "
        f"accumulate faulty nodes forever). No-evidence interruptions are transient.",
        f"Allocations: Slurm picks the allocation's nodes uniformly among the "
        f"{s['cluster_nodes']:,} nodes of the partition not excluded (the quarantine, as "
        f"sbatch --exclude, taken when the attempt is submitted); without a quarantine a faulty "
        f"node comes back with probability about {s['nodes_needed'] / s['cluster_nodes']:.0%}. "
        f"The gate passes every node (the memory probe does not see these faults); "
        f"`DecideGate` picks which go and which stand by.",
        f"Detection: {s['crash_detect_s']} s for a crash or a lost worker (heartbeat timeout), "
        f"{s['hang_timeout_s']} s for a hang (restart.hang_timeout_s), in every row.",
        f"Checkpoints every {s['checkpoint_every_s']} s of training, each stalling "
        f"{s['checkpoint_stall_s']} s; an interruption loses the training since the last "
        f"complete checkpoint (a stall in progress included).",
        f"Relaunch inside the allocation: {s['relaunch_s']} s to training again. A new attempt: "
        f"the backoff `DecideRecovery` asks for (restart.backoff_s 30 by default, doubled per "
        f"restart since the run last trained 1 h in one launch, at most 1 h; 0 for plain "
        f"resubmission), then a lognormal queue "
        f"wait (median {h(s['queue_median_s'])}, sigma {s['queue_sigma']:g}), then "
        f"{s['job_start_s']} s to training.",
        f"Time limit: {h(s['time_limit_s'])} of job time (the start and relaunches count); the "
        f"run checkpoints in its last {s['checkpoint_stall_s']} s and `DecideRecovery` queues a "
        f"new attempt at once, using no restart; it waits the queue and the start like any.",
        "Spares: 2 extra nodes per allocation in row (3), refilled only by a new attempt. "
        "`DecideRecovery` relaunches while the allocation's healthy nodes (less the blamed, lost "
        "and quarantined ones) are at least the nodes needed; otherwise a new attempt.",
        "Plain resubmission: `DecideRecovery` with relaunch_in_allocation off and backoff 0 "
        "(every interruption is a new attempt), no strikes, no quarantine.",
        "Quarantine: the controller's defaults (1 h for a first strike, doubling per strike on "
        "probation, at most 7 days, 24 h probation). restart.max_restarts is 1000, the most "
        "the spec allows.",
        "Accounting: `ComputeGoodput` counts checkpoint stalls as running, so its ratio is "
        "higher than the effective training time by the stalls; here the job start is GATING "
        "and a relaunch RESTARTING, whereas in a real run the time from GO to the first step "
        "(model load) would count as running too.",
    ]


if __name__ == "__main__":
    main()
