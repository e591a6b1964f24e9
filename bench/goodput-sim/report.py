#!/usr/bin/env python3
"""Turns goodput_sim's JSON into bench/results/goodput-sim-<date>.{md,json} (formatting only)."""
import argparse
import json

TARGET_PCT = 97.0
TARGET_ROW = "trellis_2_spares"
# The issue's target for continuations ahead with the spare pool, the scenario
# unchanged, and for the same with Trellis's own measured failure costs.
TARGET_AHEAD_PCT = 95.0
TARGET_AHEAD_ROW = "trellis_2_spares_ahead_pool"
AHEAD_ROW = "trellis_2_spares_ahead"  # continuations ahead alone
TARGET_MEASURED_PCT = 97.0
TARGET_MEASURED_ROW = "x_measured_costs"
LOST = [("checkpoint_stalls", "checkpoint stalls"), ("redone", "redone work"),
        ("detection", "detection"), ("relaunch", "relaunch"), ("backoff", "restart backoff"),
        ("queue_wait", "queue wait"), ("job_start", "job start"), ("handoff", "handoff"),
        ("after_run_failed", "after the run failed")]
COUNTS = [("node_evidence", "node evidence"), ("no_evidence", "no evidence"), ("hang", "hang"),
          ("repeat_of_faulty_node", "faulty node again"), ("time_limit", "time limit"),
          ("trace_while_not_running", "trace hit nothing")]
AHEAD_COUNTS = [("handoffs", "handoffs"), ("waited_at_time_limit", "ahead, waited at the limit"),
                ("taken_after_failure", "ahead, taken after a failure")]
# Row x_measured_costs: the scenario's failure costs it changes or keeps, and
# where Trellis's figure comes from (rows.cc, MeasuredCostsRow, says the same).
MEASURED_COSTS = [
    ("exit_detect_s", "a rank that ends by itself (device error, same exit) noticed",
     "0.6 s from a rank's SIGSEGV to its relaunch: "
     "bench/results/gpu-e2e-2nodes-1gpu-2026-12-06.md"),
    ("crash_detect_s", "a lost worker, a network error noticed",
     "kept: restart.heartbeat_timeout_s, 30 by default; no figure for a node that goes silent "
     "(a worker killed with SIGKILL on a live node was relaunched on in 0.6 s, srun seeing it "
     "end: bench/results/heal-worker-kill-2026-12-01.md)"),
    ("hang_timeout_s", "a hang noticed",
     "kept: a setting (restart.hang_timeout_s, 600 by default), no figure"),
    ("relaunch_s", "a relaunch, and a handoff's start, to training",
     "the relaunched ranks resumed 7.2 s after their GO (1.5 s of it the checkpoint's read, "
     "3.10 GiB a rank) and their first step took 1.7 s longer (NCCL's set-up), 2 ranks: "
     "bench/results/gpu-e2e-2nodes-1gpu-2026-12-06.md; a handoff's gap was 2.2-3.4 s with "
     "ranks that load no model: bench/results/continuation-ahead-2026-12-07.md"),
    ("checkpoint_stall_s", "a checkpoint's stall of the steps",
     "written behind the steps (checkpoint.async), the step after one began was 0.11-0.19 s "
     "longer: bench/results/checkpoint-behind-2026-12-05.md; none longer on an H100: "
     "bench/results/checkpoint-copy-2026-12-05-all-mapped-70steps.md"),
    ("checkpoint_write_s", "a checkpoint on disk after its stall (0: written in place; a stop's "
     "always is, stall + write)",
     "writes behind the steps of 5.4-16.9 s for 6.2-10.9 GiB a rank: the same two files"),
    ("job_start_s", "a new allocation's start, to training",
     "kept: only the gate's decision is measured (1.0 s at 6,000 nodes: "
     "bench/results/gate-2026-11-29.md); Slurm's start of 2,048 nodes and their workers' is not"),
]
POOL_COUNTS = [("draws", "pool drawn"), ("queued_at_need", "pool still queued at a need")]


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
    p.add_argument("--machine", default="", help="the machine in words, beside the cpu")
    a = p.parse_args()
    sim = json.load(open(a.raw))
    rows = {r["key"]: r for r in sim["rows"]}
    before = None
    if a.before:
        old = json.load(open(a.before))
        # The scenario's keys added since, at values that change nothing, aside.
        if old["seeds"] == sim["seeds"] and Within(old["scenario"], sim["scenario"]):
            before = {"name": a.before_name or a.before,
                      "rows": {r["key"]: r for r in old["rows"]}}
    target = rows.get(TARGET_ROW)
    met = bool(target) and target["effective_pct_min"] >= TARGET_PCT
    ahead = rows.get(TARGET_AHEAD_ROW)
    ahead_met = bool(ahead) and ahead["effective_pct_min"] >= TARGET_AHEAD_PCT
    measured = rows.get(TARGET_MEASURED_ROW)
    measured_met = bool(measured) and measured["effective_pct_min"] >= TARGET_MEASURED_PCT
    machine = {"cores": a.cores, "cpu": a.cpu}
    if a.machine:
        machine["description"] = a.machine
    doc = {"date": a.date, "machine": machine, "command": a.command,
           "wall_s": a.wall_s, "seeds": sim["seeds"], "target_effective_pct": TARGET_PCT,
           "target_row": TARGET_ROW, "target_met": met,
           "target_ahead_effective_pct": TARGET_AHEAD_PCT, "target_ahead_row": TARGET_AHEAD_ROW,
           "target_ahead_met": ahead_met,
           "target_ahead_note": "the issue's target is continuations ahead with the spare pool, "
                                "the scenario unchanged: the row has both, a pool of "
                                f"{PoolNodes(ahead)} nodes",
           "target_measured_effective_pct": TARGET_MEASURED_PCT,
           "target_measured_row": TARGET_MEASURED_ROW, "target_measured_met": measured_met,
           "goodput_check_agrees": all(r["goodput_check_agrees"] for r in sim["rows"]),
           "scenario": sim["scenario"], "rows": sim["rows"]}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(a.md, "w") as f:
        f.write(Markdown(doc, rows, met, ahead_met, measured_met, before))


def MachineText(m):
    if m.get("description"):
        return f"{m['description']} ({m['cpu']})"
    return f"{m['cores']} cores, {m['cpu']}"


def Pct(x):
    return f"{x:.1f}"


def PoolNodes(row):
    return row["strategy"].get("spare_pool_nodes", 0) if row else 0


def Markdown(doc, rows, met, ahead_met, measured_met, before):
    s = doc["scenario"]
    seeds = " ".join(str(x) for x in doc["seeds"])
    out = [f"# Goodput under failures: a simulated {s['horizon_days']:.0f}-day run, "
           f"{doc['date']}\n",
           f"Machine: {MachineText(doc['machine'])}. Command: "
           f"`{doc['command']}` (seeds {seeds}; {doc['wall_s']} s).\n",
           f"A fake clock drives the controller's own decision code (`controller/core`: "
           f"`ClassifyLaunch` on the evidence each interruption leaves, `DecideRecovery` with its "
           f"`RestartBackoff` and the spare pool's standing job, `DecideGate`, `Strike` and "
           f"`ExcludedNodes`; in row `x_certified_return`, `DecideCertify`) through a failure "
           f"trace "
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
    ta = rows.get(TARGET_AHEAD_ROW)
    if ta:
        out.append(f"**Target: >= {TARGET_AHEAD_PCT:.0f}% with continuations ahead and the spare "
                   f"pool: {'met' if ahead_met else 'not met'}** "
                   f"({Pct(ta['mean']['effective_pct'])}%, "
                   f"{Pct(ta['effective_pct_min'])}-{Pct(ta['effective_pct_max'])} over the seeds, "
                   f"row `{TARGET_AHEAD_ROW}`: 2 spares, a pool of {PoolNodes(ta)} nodes). "
                   + WhyAhead(rows) + "\n")
    tm = rows.get(TARGET_MEASURED_ROW)
    if tm:
        verdict = ("met" if measured_met else
                   "met on the mean, not by every seed"
                   if tm["mean"]["effective_pct"] >= TARGET_MEASURED_PCT else "not met")
        out.append(f"**Target: >= {TARGET_MEASURED_PCT:.0f}% in the row of Trellis's own measured "
                   f"failure costs: {verdict}** "
                   f"({Pct(tm['mean']['effective_pct'])}%, "
                   f"{Pct(tm['effective_pct_min'])}-{Pct(tm['effective_pct_max'])} over the seeds, "
                   f"row `{TARGET_MEASURED_ROW}`). " + WhyMeasured(rows) + "\n")

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
            ["new attempts after a failure", "relaunches", "restarts used", "nodes quarantined"] +
            [n for _, n in AHEAD_COUNTS] + [n for _, n in POOL_COUNTS])
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in doc["rows"]:
        m = r["mean"]
        cells = [Label(r)] + [f"{m['interruptions'][k]:.0f}" for k, _ in COUNTS]
        cells += [f"{m[k]:.0f}" for k in ("new_attempts_after_failure", "relaunches",
                                          "restarts_used", "nodes_quarantined")]
        cells += [f"{m['continuations_ahead'][k]:.0f}" for k, _ in AHEAD_COUNTS]
        pool = m.get("spare_pool", {})
        cells += [f"{pool.get(k, 0):.0f}" for k, _ in POOL_COUNTS]
        out.append("| " + " | ".join(cells) + " |")
    failed = [r["label"] for r in doc["rows"] if any(x["run_failed"] for x in r["per_seed"])]
    out.append("\n" + ("Runs that used up restart.max_restarts: " + ", ".join(failed) + "."
                       if failed else "No run used up restart.max_restarts.") +
               " \"Trace hit nothing\": interruptions of the trace that came while no launch of"
               " the run was training (queued, starting, relaunching); they hit no node of the"
               " run. \"Pool drawn\": relaunches that drew the standing pool job; \"pool still"
               " queued at a need\": new attempts after a failure while the pool job still waited"
               " in the queue.\n")

    mech = [r for r in doc["rows"] if r.get("mechanism")]
    if mech:
        out.append("## Mechanism rows: the scenario unchanged\n")
        for r in mech:
            out.append(f"- *{r['label']}* (`{r['key']}`): {r['mechanism']}.")
        out.append("")

    extra = [r for r in doc["rows"] if r["assumption_change"]]
    if extra:
        out.append("## Extra rows: changed assumptions\n")
        for r in extra:
            out.append(f"- *{r['label']}* (`{r['key']}`): {r['assumption_change']}.")
        out.append("")

    tm = rows.get(TARGET_MEASURED_ROW)
    if tm:
        out += MeasuredCostsTable(tm, s)

    findings = Findings(rows, before, s)
    if findings:
        out.append("## Findings\n")
        out += [f"- {x}" for x in findings]
        out.append("")

    out.append("## Assumptions\n")
    out += [f"- {x}" for x in Assumptions(s, rows.get("x_certified_return"))]
    out.append("")
    return "\n".join(out) + "\n"


def MeasuredCostsTable(row, s):
    """The failure costs of row x_measured_costs against the scenario's, with their sources."""
    changes = row["scenario_changes"]
    out = [f"## Trellis's measured failure costs (row `{row['key']}`)\n",
           "| cost | scenario | Trellis | from |", "|---|---|---|---|"]
    for key, what, source in MEASURED_COSTS:
        out.append(f"| {what} | {s[key]:g} s | {changes.get(key, s[key]):g} s | {source} |")
    out.append(f"\nEach figure is rounded up to the simulator's second where it is not whole. "
               f"With the stall of 0.19 s, checkpoints \"auto\" come every "
               f"{Young(changes.get('checkpoint_stall_s', s['checkpoint_stall_s']), s):.0f} s. "
               f"The figures were measured on runs of 2 ranks (moe-bench at 2 and 4 layers, "
               f"3.1-10.9 GiB of checkpoint a rank): the start, the checkpoint read and the "
               f"NCCL set-up of 16,384 ranks are not measured, and a larger model's shard takes "
               f"longer to write. The queue waits, the time limit, the trace and the faulty "
               f"nodes are the scenario's.\n")
    return out


def Young(stall_s, s):
    """checkpoint.every_steps = "auto"'s period on the trace's interruption rate."""
    mtbf = s["horizon_days"] * 86400 / s["interruptions"]
    return min(max((2 * stall_s * mtbf) ** 0.5, 60), 14400)


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
    out += AheadFindings(rows)
    out += PoolFindings(rows, s)
    out += AutoCheckpointFindings(rows, s)
    out += MeasuredFindings(rows, s)
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
    out += CertifiedFindings(rows, s)
    if t:
        out.append(f"`ComputeGoodput` reports {Pct(t['mean']['compute_goodput_pct'])}% for "
                   f"row (3), "
                   f"above the effective {Pct(t['mean']['effective_pct'])}% by the checkpoint "
                   f"stalls, which it counts as running.")
    return out


def CertifiedFindings(rows, s):
    """Certified return against the unrepaired quarantine it answers, and row (3)."""
    t, unrep, cert = (rows.get(k) for k in (TARGET_ROW, "x_unrepaired_quarantine",
                                            "x_certified_return"))
    if not (t and unrep and cert):
        return []
    eff = lambda r: r["mean"]["effective_pct"]
    again = lambda r: r["mean"]["interruptions"]["repeat_of_faulty_node"]
    lost = lambda r, k: r["mean"]["lost_pct"][k]
    st, c = cert["strategy"], cert["mean"]["certified_return"]
    node_h = c["checks"] * st["certify_check_s"] / 3600
    run_node_h = s["nodes_needed"] * s["horizon_days"] * 24
    return [
        f"Certified return (row `x_certified_return`: as `x_unrepaired_quarantine`, but a node "
        f"whose quarantine expires must pass a check first; that a check catches a fault still "
        f"there with probability {st['certify_catch']:g} and takes "
        f"{st['certify_check_s'] / 60:g} minutes are assumptions): {Pct(eff(cert))}% "
        f"({Pct(cert['effective_pct_min'])}-{Pct(cert['effective_pct_max'])}; per seed "
        f"{', '.join(f'{x:+.1f}' for x in SeedGains(unrep, cert))} over the unrepaired "
        f"quarantine's {Pct(eff(unrep))}%), {eff(t) - eff(cert):.1f} points short of row (3)'s "
        f"{Pct(eff(t))}%, where the quarantine repairs. A run's "
        f"{c['checks']:,.0f} checks caught {c['failed']:,.0f} faults still there (each a new "
        f"strike: the time out doubles until the site's repair, {s['site_repair_s'] / 3600:g} h "
        f"after the first failure, lets the node pass) and missed {c['passed_faulty']:.0f}: a "
        f"faulty node came back and failed again {again(cert):.0f} times a run instead of "
        f"{again(unrep):.0f}. What is left against row (3) are those misses' failures: new "
        f"attempts after a failure {cert['mean']['new_attempts_after_failure']:.0f} against "
        f"{t['mean']['new_attempts_after_failure']:.0f}, queue wait "
        f"{Pct(lost(cert, 'queue_wait'))} against {Pct(lost(t, 'queue_wait'))} points, redone "
        f"work {Pct(lost(cert, 'redone'))} against {Pct(lost(t, 'redone'))}. The checks cost "
        f"nodes, not the run: {node_h:,.0f} node-hours a run, "
        f"{100 * node_h / run_node_h:.3f}% of the run's {run_node_h:,.0f} "
        f"({s['nodes_needed']:,} nodes for {s['horizon_days']:g} days)."]


def Compared(rows, before):
    """The rows against the same rows of `before` (earlier code, same scenario and seeds)."""
    eff = lambda r: r["mean"]["effective_pct"]
    same, changed = [], []
    for key, b in before["rows"].items():
        if key in rows:
            (same if Within(b, rows[key]) else changed).append(key)
    text = f"Against `{before['name']}` (earlier code, the same scenario and seeds): "
    if not changed:
        return text + (f"all {len(same)} of its rows are unchanged, every figure of every seed "
                       f"identical (the keys added since aside, zero for them): the mechanisms "
                       f"draw from random streams of their own, so a row without them draws the "
                       f"same random numbers as before.")
    return text + (f"{len(same)} rows identical; changed: " +
                   "; ".join(f"{rows[k]['label']} {Pct(eff(before['rows'][k]))}% -> "
                             f"{Pct(eff(rows[k]))}%" for k in changed) + ".")


def Within(old, new):
    """Every value of `old` is the same in `new` (keys that `new` adds aside)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and Within(v, new[k])
                                             for k, v in old.items())
    if isinstance(old, list):
        return (isinstance(new, list) and len(old) == len(new) and
                all(Within(a, b) for a, b in zip(old, new)))
    return old == new


def SeedGains(base, row):
    """Per seed, `row`'s effective % less `base`'s (the same seeds, in order)."""
    return [b["effective_pct"] - a["effective_pct"]
            for a, b in zip(base["per_seed"], row["per_seed"])]


def WhyAhead(rows):
    """What the pool adds to continuations ahead, and the bounds that the extra rows measure."""
    parts = []
    eff = lambda r: r["mean"]["effective_pct"]
    a, p, ap = rows.get(AHEAD_ROW), rows.get("trellis_2_spares_pool"), \
        rows.get(TARGET_AHEAD_ROW)
    if a and p and ap:
        sizes = [r for r in (rows.get("x_pool_1_ahead"), rows.get("x_pool_2_ahead")) if r]
        parts.append(
            f"Continuations ahead alone reach {Pct(eff(a))}%, the pool alone "
            f"{Pct(eff(p))}%; together, {ap['mean']['new_attempts_after_failure']:.1f} failures "
            f"a run need a new attempt, against {a['mean']['new_attempts_after_failure']:.0f} "
            f"with continuations ahead alone" + ("; pools of " + " and ".join(
                str(PoolNodes(r)) for r in sizes) + " nodes reach " + " and ".join(
                f"{Pct(eff(r))}%" for r in sizes) if sizes else "") + ".")
    many, calm = rows.get("x_16_spares_ahead"), rows.get("x_no_interruptions_ahead")
    if many:
        parts.append(f"With 16 spares, which outlast the strikes between two time limits (no new "
                     f"attempt after a failure), continuations ahead "
                     f"reach {Pct(many['mean']['effective_pct'])}%"
                     f" ({Pct(many['effective_pct_min'])}-{Pct(many['effective_pct_max'])}): no "
                     f"pool can do more.")
    if calm:
        m = ap["mean"]["lost_pct"] if ap else None
        parts.append(f"With no interruption at all they reach "
                     f"{Pct(calm['mean']['effective_pct'])}%"
                     f" ({Pct(calm['effective_pct_min'])}-{Pct(calm['effective_pct_max'])}): "
                     f"the mechanism's bound in this scenario"
                     + (f"; the interruptions' own costs at the scenario's figures take "
                        f"{m['redone'] + m['relaunch'] + m['detection']:.1f} points more (redone "
                        f"work {Pct(m['redone'])}, relaunches {Pct(m['relaunch'])}, detection "
                        f"{Pct(m['detection'])}), so that 95% is out of reach with the "
                        f"scenario's failure costs, whatever the pool's size."
                        if m else "."))
    return " ".join(parts)


def WhyMeasured(rows):
    """What is left in the row of Trellis's measured failure costs."""
    t = rows.get(TARGET_MEASURED_ROW)
    same = rows.get("trellis_2_spares_ahead_auto_checkpoints_pool")
    m, lost = t["mean"], t["mean"]["lost_pct"]
    hang_pts = HangDetectionPct(t)
    waited = m["queue_wait_after_time_limit_pct"]
    out = []
    if same:
        out.append(f"The same mechanisms with the scenario's failure costs reach "
                   f"{Pct(same['mean']['effective_pct'])}% (row `{same['key']}`).")
    out.append(
        f"What is left: the queue wait of continuations that waited longer than their lead, "
        f"{Pct(waited)} points ({m['continuations_ahead']['waited_at_time_limit']:.1f} a run "
        f"waited at the limit), and {Pct(lost['queue_wait'] - waited)} of other queue wait; "
        f"detection {Pct(lost['detection'])}, of it {Pct(hang_pts)} the hangs "
        f"({m['verdict_classes']['hang']:.1f} a run, 300 s each: restart.hang_timeout_s, for "
        f"which Trellis has no figure); redone work {Pct(lost['redone'])}, checkpoint stalls "
        f"{Pct(lost['checkpoint_stalls'])}, relaunches {Pct(lost['relaunch'])}, job starts "
        f"{Pct(lost['job_start'])}, handoffs {Pct(lost['handoff'])}.")
    longer = rows.get("x_measured_costs_lead_8h")
    if longer:
        lm = longer["mean"]
        out.append(
            f"With restart.continuation_lead_s = 8 h instead of \"auto\" (a user's setting; row "
            f"`{longer['key']}`): {Pct(lm['effective_pct'])}% ({Pct(longer['effective_pct_min'])}-"
            f"{Pct(longer['effective_pct_max'])}), the queue wait at the limit "
            f"{Pct(waited)} -> {Pct(lm['queue_wait_after_time_limit_pct'])} points, handoffs "
            f"{Pct(lost['handoff'])} -> {Pct(lm['lost_pct']['handoff'])}: \"auto\" takes a "
            f"handoff at 300 s (kAutoLeadHandoffCost), where this row's cost 10 s, and so "
            f"chooses shorter leads than would pay here.")
    return " ".join(out)


def HangDetectionPct(row):
    """The detection of hangs, in points: each waits the hang timeout."""
    m = row["mean"]
    timeout = row["scenario_changes"].get("hang_timeout_s", 300)
    return 100 * m["verdict_classes"]["hang"] * timeout * 1000 / HorizonMs(row)


def HorizonMs(row):
    """The run's wall time, from any per-seed ledger (hours add up to it)."""
    return sum(row["per_seed"][0]["hours"].values()) * 3.6e6


def PoolFindings(rows, s):
    """What the spare pool gives, by size, and what the model leaves out."""
    out = []
    eff = lambda r: r["mean"]["effective_pct"]
    lost = lambda r, k: r["mean"]["lost_pct"][k]
    t, a = rows.get(TARGET_ROW), rows.get(AHEAD_ROW)
    p, ap = rows.get("trellis_2_spares_pool"), rows.get(TARGET_AHEAD_ROW)
    if not (t and a and p and ap):
        return out
    n = PoolNodes(ap)
    pm, apm = p["mean"], ap["mean"]
    out.append(
        f"The spare pool of {n} nodes gives row (3) {eff(p) - eff(t):+.1f} points: "
        f"{Pct(eff(t))}% -> {Pct(eff(p))}% (per seed "
        f"{', '.join(f'{x:+.1f}' for x in SeedGains(t, p))}). New attempts after a failure "
        f"fall from {t['mean']['new_attempts_after_failure']:.0f} to "
        f"{pm['new_attempts_after_failure']:.1f} a run ({pm['spare_pool']['draws']:.0f} "
        f"relaunches drew the pool), and the queue wait from {Pct(lost(t, 'queue_wait'))} to "
        f"{Pct(lost(p, 'queue_wait'))} points. What is left of it is the time limits': the "
        f"run now reaches them ({pm['interruptions']['time_limit']:.0f} a run against "
        f"{t['mean']['interruptions']['time_limit']:.0f}), and each continuation waits the "
        f"queue ({Pct(pm['queue_wait_after_time_limit_pct'])} points): continuations ahead's "
        f"part.")
    apc = apm["continuations_ahead"]
    out.append(
        f"Both mechanisms: {Pct(eff(a))}% with continuations ahead -> {Pct(eff(ap))}% with the "
        f"pool too ({eff(ap) - eff(a):+.1f} points; per seed "
        f"{', '.join(f'{x:+.1f}' for x in SeedGains(a, ap))}). The queue wait falls from "
        f"{Pct(lost(a, 'queue_wait'))} to {Pct(lost(ap, 'queue_wait'))} points, of it "
        f"{Pct(apm['queue_wait_after_time_limit_pct'])} the continuations that waited longer "
        f"than their lead ({apc['waited_at_time_limit']:.1f} of {apc['submitted']:.1f} a run; "
        f"{apc['handoffs']:.1f} handed over). {apm['spare_pool']['queued_at_need']:.1f} "
        f"failures a run still found the pool job in the queue and needed a new attempt. More "
        f"relaunches ({apm['relaunches']:.0f} against {a['mean']['relaunches']:.0f}) cost "
        f"{Pct(lost(ap, 'relaunch'))} points instead of {Pct(lost(a, 'relaunch'))}, and the run "
        f"training longer meets more interruptions (trace hit nothing "
        f"{apm['interruptions']['trace_while_not_running']:.0f} against "
        f"{a['mean']['interruptions']['trace_while_not_running']:.0f}): redone work "
        f"{Pct(lost(ap, 'redone'))}, detection {Pct(lost(ap, 'detection'))}, checkpoint stalls "
        f"{Pct(lost(ap, 'checkpoint_stalls'))}.")
    node_hours = (s["nodes_needed"] + 2) * HorizonMs(ap) / 3.6e6
    sized = [r for r in (rows.get("x_pool_1_ahead"), rows.get("x_pool_2_ahead"), ap) if r]
    out.append(
        "The pool's size, with continuations ahead: " + "; ".join(
            f"{PoolNodes(r)} {'node' if PoolNodes(r) == 1 else 'nodes'} {Pct(eff(r))}% "
            f"({Pct(r['effective_pct_min'])}-{Pct(r['effective_pct_max'])}), "
            f"{r['mean']['new_attempts_after_failure']:.1f} new attempts after a failure, "
            f"{r['mean']['spare_pool']['draws']:.0f} draws, idle pool nodes "
            f"{100 * PoolNodes(r) * r['mean']['spare_pool']['standing_hours'] / node_hours:.2f}% "
            f"of the run's node-hours" for r in sized) +
        f". One node covers one blamed node until the refill stands (a queue wait, median "
        f"{s['queue_median_s'] / 3600:g} h, after each draw); with blamed nodes some hours "
        f"apart, {n} cover nearly every gap, for idle nodes that cost less than the points "
        f"they give. Hence {n} in the mechanism rows.")
    ps = apm["spare_pool"]
    out.append(
        f"The pool job's own time limit ({s['time_limit_s'] / 3600:g} h from its start, as any "
        f"job of the partition): {ps['expired_standing']:.1f} standing pool jobs a run reached "
        f"it undrawn and were replaced, and {ps.get('replaced_short', 0):.1f} were replaced "
        f"because they would have ended before the run's job (submitted in an earlier "
        f"attempt), as the controller does (controller/core/spare_pool.h); the replacements "
        f"wait the queue. Drawn pool jobs that reached their own limit before their attempt "
        f"ended: {ps['drawn_outlived']:.1f} (a check: none is drawn that would).")
    all3 = rows.get("trellis_2_spares_ahead_auto_checkpoints_pool")
    if all3:
        out.append(
            f"All three mechanisms (continuations ahead, checkpoints \"auto\", the pool): "
            f"{Pct(eff(all3))}% ({Pct(all3['effective_pct_min'])}-"
            f"{Pct(all3['effective_pct_max'])}), {eff(all3) - eff(ap):+.1f} points over the two: "
            f"the runs make the same decisions, and Young's period "
            f"({Young(s['checkpoint_stall_s'], s):.0f} s) is near the scenario's "
            f"{s['checkpoint_every_s']} s (checkpoint stalls "
            f"{Pct(lost(ap, 'checkpoint_stalls'))} -> "
            f"{Pct(lost(all3, 'checkpoint_stalls'))}, redone work {Pct(lost(ap, 'redone'))} -> "
            f"{Pct(lost(all3, 'redone'))}).")
    return out


def MeasuredFindings(rows, s):
    """The row of Trellis's measured failure costs against the same with the scenario's."""
    t = rows.get(TARGET_MEASURED_ROW)
    same = rows.get("trellis_2_spares_ahead_auto_checkpoints_pool")
    if not (t and same):
        return []
    eff = lambda r: r["mean"]["effective_pct"]
    lost = lambda r, k: r["mean"]["lost_pct"][k]
    keys = [("checkpoint_stalls", "checkpoint stalls"), ("redone", "redone work"),
            ("relaunch", "relaunches"), ("detection", "detection"), ("handoff", "handoffs")]
    return [
        f"Trellis's measured failure costs (row `{t['key']}`, the table above): "
        f"{Pct(eff(same))}% -> {Pct(eff(t))}% "
        f"({Pct(t['effective_pct_min'])}-{Pct(t['effective_pct_max'])}; per seed "
        f"{', '.join(Pct(x['effective_pct']) for x in t['per_seed'])}): "
        + ", ".join(f"{name} {Pct(lost(same, k))} -> {Pct(lost(t, k))}" for k, name in keys) +
        f" points. Checkpoints behind the steps pay twice: their stall is small, and Young's "
        f"period on it ({Young(t['scenario_changes'].get('checkpoint_stall_s', 5), s):.0f} s) "
        f"makes the work a failure loses small too, though each checkpoint is on disk only "
        f"{t['scenario_changes'].get('checkpoint_write_s', 0)} s after it. The queue wait "
        f"({Pct(lost(t, 'queue_wait'))}) and the hangs' detection ({Pct(HangDetectionPct(t))}) "
        f"are the scenario's and now the largest losses; with handoffs at "
        f"{t['scenario_changes'].get('relaunch_s', s['relaunch_s'])} s, a longer lead (more "
        f"continuations ahead starting before the limit) would cost little."]


def AutoCheckpointFindings(rows, s):
    """What checkpoint.every_steps = "auto" changes against the scenario's fixed interval."""
    a, y = rows.get(AHEAD_ROW), rows.get("trellis_2_spares_ahead_auto_checkpoints")
    if not (a and y and s["interruptions"] > 0):
        return []
    mtbf = s["horizon_days"] * 86400 / s["interruptions"]
    young = (2 * s["checkpoint_stall_s"] * mtbf) ** 0.5
    lost = lambda r, k: r["mean"]["lost_pct"][k]
    gain = round(y["mean"]["effective_pct"], 1) - round(a["mean"]["effective_pct"], 1)
    return [f"Checkpoints \"auto\" give {gain:+.1f} "
            f"points over continuations ahead alone: {Pct(a['mean']['effective_pct'])}% -> "
            f"{Pct(y['mean']['effective_pct'])}%. Young's period on the scenario's stall "
            f"({s['checkpoint_stall_s']} s) and the trace's time between interruptions "
            f"({mtbf:,.0f} s) is {young:.0f} s against the scenario's {s['checkpoint_every_s']} s, "
            f"already near it: checkpoint stalls {Pct(lost(a, 'checkpoint_stalls'))} -> "
            f"{Pct(lost(y, 'checkpoint_stalls'))} points, redone work {Pct(lost(a, 'redone'))} -> "
            f"{Pct(lost(y, 'redone'))}. The rule pays where a fixed interval is far from it (a "
            f"costlier checkpoint, a run on fewer nodes, a flakier partition), which this "
            f"scenario does not vary."]


def AheadFindings(rows):
    """What continuations ahead give, row by row, and what they leave."""
    out = []
    eff = lambda r: r["mean"]["effective_pct"]
    lost = lambda r, k: r["mean"]["lost_pct"][k]
    t, a = rows.get(TARGET_ROW), rows.get(AHEAD_ROW)
    if t and a:
        m, c = a["mean"], a["mean"]["continuations_ahead"]
        g = SeedGains(t, a)
        out.append(
            f"Continuations ahead give row (3) {eff(a) - eff(t):+.1f} points: {Pct(eff(t))}% -> "
            f"{Pct(eff(a))}% (per seed {', '.join(f'{x:+.1f}' for x in g)}; the rows differ in "
            f"their random draws once their runs differ, so a seed's figure is noisy). The queue "
            f"wait after time limits falls from {Pct(t['mean']['queue_wait_after_time_limit_pct'])}"
            f" to {Pct(m['queue_wait_after_time_limit_pct'])} points: a run submits "
            f"{c['submitted']:.1f} continuations ahead (mean lead {c['lead_s_mean'] / 3600:.1f} h), "
            f"{c['handoffs']:.1f} take over while it trains (handoffs: "
            f"{m['hours']['handoff']:.1f} h in all, {Pct(lost(a, 'handoff'))} points), {c['waited_at_time_limit']:.1f} still wait at the limit, and "
            f"{c['taken_after_failure']:.1f} are taken by a failure's new attempt instead of an "
            f"sbatch.")
        out.append(
            f"What is left in row (3) with continuations ahead: the queue wait of new attempts "
            f"after a failure, {Pct(lost(a, 'queue_wait') - m['queue_wait_after_time_limit_pct'])}"
            f" of its {Pct(lost(a, 'queue_wait'))} points of queue wait. Two spares are used up "
            f"within a day ({m['new_attempts_after_failure']:.0f} new attempts after a failure a "
            f"run against {m['relaunches']:.0f} relaunches), so most attempts end in a failure "
            f"long before their limit ({m['attempts']:.0f} attempts, "
            f"{m['interruptions']['time_limit']:.1f} time-limit stops and "
            f"{c['handoffs']:.1f} handoffs a run), and a continuation waits ahead only in the "
            f"last lead and margin before the limit: {c['taken_after_failure']:.1f} of the "
            f"{m['new_attempts_after_failure']:.0f} new attempts after a failure found one, the "
            f"others were fresh sbatches that waited the whole queue. Keeping those attempts out "
            f"of the queue is the spare pool's part (below). Then come redone work "
            f"{Pct(lost(a, 'redone'))}, checkpoint stalls "
            f"{Pct(lost(a, 'checkpoint_stalls'))}, relaunches {Pct(lost(a, 'relaunch'))}, "
            f"detection {Pct(lost(a, 'detection'))} and job starts {Pct(lost(a, 'job_start'))}.")
    many, many_a = rows.get("x_16_spares"), rows.get("x_16_spares_ahead")
    if many and many_a:
        c = many_a["mean"]["continuations_ahead"]
        out.append(
            f"With 16 spares, where the run reaches its time limits "
            f"({many['mean']['interruptions']['time_limit']:.0f} a run without the mechanism), "
            f"continuations ahead give {eff(many_a) - eff(many):+.1f} points: "
            f"{Pct(eff(many))}% -> {Pct(eff(many_a))}%, the queue wait "
            f"{Pct(lost(many, 'queue_wait'))} -> {Pct(lost(many_a, 'queue_wait'))} points "
            f"({c['handoffs']:.1f} handoffs, {c['waited_at_time_limit']:.1f} waited at the "
            f"limit, handoff {Pct(lost(many_a, 'handoff'))} points).")
    calm, calm_a = rows.get("x_no_interruptions"), rows.get("x_no_interruptions_ahead")
    if calm and calm_a:
        c = calm_a["mean"]["continuations_ahead"]
        out.append(
            f"The mechanism's bound (no interruptions): {Pct(eff(calm))}% -> {Pct(eff(calm_a))}%"
            f", the queue wait {Pct(lost(calm, 'queue_wait'))} -> "
            f"{Pct(lost(calm_a, 'queue_wait'))} points. What is left of it: the first sbatch, "
            f"the prior lead (10 minutes) of the first continuations, before three queue waits "
            f"are seen, and the waits longer than the lead: the lead weighs the waits seen "
            f"(fitted by a lognormal) against shorter attempts, and the tail is long "
            f"({c['waited_at_time_limit']:.1f} "
            f"of {c['submitted']:.1f} continuations a run waited at the limit, "
            f"{Pct(calm_a['mean']['queue_wait_after_time_limit_pct'])} points); then the "
            f"checkpoint stalls {Pct(lost(calm_a, 'checkpoint_stalls'))} and the handoffs "
            f"{Pct(lost(calm_a, 'handoff'))} ({c['handoffs']:.1f} a run, relaunch_s each).")
    return out


def CertifyAssumption(cert):
    if not cert:
        return []
    st = cert["strategy"]
    return [f"Certified return (row `x_certified_return`): the controller's check job on a node "
            f"whose quarantine expired starts at the expiry (its own queue wait is not "
            f"modelled) and ends {st['certify_check_s'] / 60:g} minutes later (assumed), taking "
            f"the node's time, not the run's; the node stays out meanwhile. It finds the node "
            f"as it is when it starts: a fault still there fails it with probability "
            f"{st['certify_catch']:g} (assumed), drawn from a random stream of its own, and "
            f"`DecideCertify` makes that a new strike (`Strike`, by `certify`); a pass, of a "
            f"healthy node or a missed fault, puts the node on probation."]


def Assumptions(s, cert):
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
        f"when the controller quarantines it (it is repaired while out; the extra rows "
        f"`x_unrepaired_quarantine` and `x_certified_return` drop this), or when the site's "
        f"own health checks repair it "
        f"{h(s['site_repair_s'])} after its first failure (so that plain resubmission does not "
        f"accumulate faulty nodes forever). No-evidence interruptions are transient.",
        f"Allocations: Slurm picks the allocation's nodes uniformly among the "
        f"{s['cluster_nodes']:,} nodes of the partition not excluded (the quarantine, as "
        f"sbatch --exclude, taken when the attempt is submitted); without a quarantine a faulty "
        f"node comes back with probability about {s['nodes_needed'] / s['cluster_nodes']:.0%}. "
        f"The gate passes every node (the memory probe does not see these faults); "
        f"`DecideGate` picks which go and which stand by.",
        f"Failure costs: the scenario's below, in every row but `{TARGET_MEASURED_ROW}` (its "
        f"table above).",
        f"Detection: {s['crash_detect_s']} s for a crash or a lost worker (heartbeat timeout)" +
        (f", {s['exit_detect_s']} s for a rank that ends by itself (a device error, the same "
         f"exit)" if s['exit_detect_s'] != s['crash_detect_s'] else "") +
        f", {s['hang_timeout_s']} s for a hang (restart.hang_timeout_s).",
        f"Checkpoints every {s['checkpoint_every_s']} s of training, each stalling "
        f"{s['checkpoint_stall_s']:g} s" +
        (f" and on disk {s['checkpoint_write_s']} s after" if s['checkpoint_write_s'] else
         ", written in place") +
        "; an interruption loses the training since the last complete checkpoint (a stall in "
        "progress included).",
        f"Relaunch inside the allocation: {s['relaunch_s']} s to training again. A new attempt: "
        f"the backoff `DecideRecovery` asks for (restart.backoff_s 30 by default, doubled per "
        f"restart since the run last trained 1 h in one launch, at most 1 h; 0 for plain "
        f"resubmission), then a lognormal queue "
        f"wait (median {h(s['queue_median_s'])}, sigma {s['queue_sigma']:g}), then "
        f"{s['job_start_s']} s to training.",
        f"Time limit: {h(s['time_limit_s'])} of job time (the start and relaunches count); the "
        f"run checkpoints in its last {s['checkpoint_stall_s']} s and `DecideRecovery` queues a "
        f"new attempt at once, using no restart; without continuations ahead it waits the "
        f"queue and the start like any.",
        "Continuations ahead (the rows that say so): the continuation is submitted when "
        "`DecideAhead` says so (the run RUNNING, at most the lead and `kSubmitAheadMargin` "
        "(120 s) left), eligible the lead before the limit; the lead is "
        "`ChooseContinuationLead`'s \"auto\" (slurm.signal_grace_s 120) over the run's own "
        "queue waits as the controller measures them (`QueueWaitsOn`: an attempt's first GO "
        "less when it became eligible). Its queue wait is drawn from the same lognormal, from a "
        "random stream of its own, so that the rows without it draw what they drew before. Its "
        "allocation starting while the run trains is a handoff there: the launch stops with a "
        "checkpoint, as at the limit, `ClassifyLaunch` says `handoff` and `DecideRecovery` a new "
        "attempt using no restart; the new allocation's workers are taken to have registered "
        "and passed the gate at once (the job start is not split), its ranks train after "
        f"relaunch_s ({s['relaunch_s']} s: they start and load the checkpoint), counted as "
        "handoff, and its time limit counts from its start. Starting while the run does not "
        "train (detecting a failure, relaunching), it waits for the launch's GO. If the limit "
        "comes first, the run waits for the rest of its queue wait only (no sbatch), then the "
        "job start. A new attempt after a failure takes the continuation waiting ahead: "
        "started already, its workers take over after relaunch_s; otherwise it is released as "
        "the controller does (when it would be eligible after the run may go on, or the "
        "quarantine changed): eligible from the later of now and the backoff's end, keeping "
        "the queue time it has served (assumption: Slurm keeps its place), off today's "
        "quarantine, then the job start.",
        "Spares: 2 extra nodes per allocation in row (3), refilled only by a new attempt. "
        "`DecideRecovery` relaunches while the allocation's healthy nodes (less the blamed, lost "
        "and quarantined ones) are at least the nodes needed, or are with the spare pool's; "
        "otherwise a new attempt.",
        "Spare pool (the rows that say so, restart.spare_pool_nodes): the run's pool job is "
        "submitted when its first job starts and waits a queue wait from the same lognormal (a "
        "random stream of its own, as are its nodes, so that the rows without a pool draw what "
        "they drew before). Its nodes are chosen when it starts, off the quarantine and the "
        "nodes the run's allocation holds, and a new allocation is made off a standing pool "
        "job's nodes. `DecideRecovery` gets it as `pool` only while it runs; a relaunch that "
        "draws it (`draws_pool`) costs relaunch_s and a restart like any, its nodes join the "
        "allocation (the gate's spares) for the rest of the attempt and fail like any of its "
        "nodes, and a new pool job is submitted at once (the refill) and waits the queue. A "
        "pool job standing idle is not hit by the trace, whose interruptions are those of "
        "training nodes (a faulty node not yet struck may still be drawn, and fails again as "
        "faulty nodes do). A standing pool job that reaches the partition's time limit (from "
        "its start) ends, and another is submitted then. A drawn pool job is kept to the end of "
        "its attempt, even where its own time limit comes first (counted; see the findings).",
        "Plain resubmission: `DecideRecovery` with relaunch_in_allocation off and backoff 0 "
        "(every interruption is a new attempt), no strikes, no quarantine.",
        "Quarantine: the controller's defaults (1 h for a first strike, doubling per strike on "
        "probation, at most 7 days, 24 h probation), without certified return but in row "
        "`x_certified_return`. restart.max_restarts is 1000, the most the spec allows.",
    ] + CertifyAssumption(cert) + [
        "Accounting: `ComputeGoodput` counts checkpoint stalls as running, so its ratio is "
        "higher than the effective training time by the stalls; here the job start is GATING "
        "and a relaunch RESTARTING, whereas in a real run the time from GO to the first step "
        "(model load) would count as running too.",
    ]


if __name__ == "__main__":
    main()
