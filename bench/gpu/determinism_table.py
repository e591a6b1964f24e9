"""bench/gpu/determinism.sh's table: determinism_table.py WORK PREFIX COMMAND CONFIG
KERNELS reads WORK/runs and each WORK/<label>.jsonl (trellis-train --json) and
writes PREFIX.{md,json}: each pair of runs compared loss by loss (the same
bits or not, and how far apart), step times side by side. KERNELS: "with" or
"without" (whether trainer_core was built with kernels/). Exits 1 when the
two deterministic runs differ or a run failed."""
import json
import os
import sys

sys.path.insert(0, "bench")
import machine  # noqa: E402
from loss_records import drift  # noqa: E402
from offload_table import STEP_ROWS, runs_table, summary  # noqa: E402

# (a, b, what the pair shows)
PAIRS = [("default", "default_again", "the default, run twice"),
         ("deterministic", "deterministic_again", "training.deterministic, run twice"),
         ("default", "deterministic", "the two modes")]


def compare(runs, a, b):
    if "losses" not in runs.get(a, {}) or "losses" not in runs.get(b, {}):
        return None
    la, lb = runs[a]["losses"], runs[b]["losses"]
    first, largest = drift(la, lb)
    return dict(steps=min(len(la), len(lb)), same_bits=first is None and len(la) == len(lb),
                first_differing_step=first, max_relative_loss_difference=largest)


def main():
    work, prefix, command, config, kernels = sys.argv[1:6]
    labels = [l.strip() for l in open(f"{work}/runs") if l.strip()]
    runs = {label: summary(work, label) for label in labels}
    pairs = {f"{a}_vs_{b}": compare(runs, a, b) for a, b, _ in PAIRS}
    cost = None
    if all("median_step_seconds" in runs.get(l, {}) for l in
           ("default", "default_again", "deterministic", "deterministic_again")):
        mean = lambda *ls: sum(runs[l]["median_step_seconds"] for l in ls) / len(ls)
        cost = mean("deterministic", "deterministic_again") / mean("default", "default_again") - 1
    doc = dict(benchmark="determinism-gpu", date=machine.now_utc(),
               machine=machine.describe(os.environ.get("GPU_NAME", "")), command=command,
               config=config, kernels=kernels, runs=runs, pairs=pairs,
               deterministic_step_time_cost=cost)
    json.dump(doc, open(prefix + ".json", "w"), indent=1)

    rows = STEP_ROWS + [("first loss", "losses", lambda v: f"{v[0]:.6f}"),
                        ("last loss", "losses", lambda v: f"{v[-1]:.6f}")]
    md = [f"# Run-to-run reproducibility of trellis-train: {config} ({doc['date'][:10]})", "",
          f"- Machine: {doc['machine']}", f"- Command: `{command}`",
          f"- trainer_core built {kernels} kernels/; every run from the same weights, batches "
          "and seed; `deterministic` runs set `training.deterministic = true`; the runs "
          "alternate default, deterministic, default, deterministic",
          "- Medians over the steps after the first", ""]
    md += runs_table(runs, labels, rows)
    md += ["", "| pair | same losses bit for bit | first step that differs | "
           "max relative loss difference |", "|---|---|---|---|"]
    for a, b, what in PAIRS:
        p = pairs[f"{a}_vs_{b}"]
        if p is None:
            md.append(f"| {what} | a run failed | - | - |")
        else:
            md.append(f"| {what} ({a} vs {b}, {p['steps']} steps) | "
                      f"{'yes' if p['same_bits'] else 'no'} | {p['first_differing_step'] or '-'} | "
                      f"{p['max_relative_loss_difference']:.2e} |")
    if cost is not None:
        md += ["", f"Deterministic mode's step time against the default (means of both runs' "
               f"medians): {cost * 100:+.1f}%"]
    open(prefix + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))
    det = pairs["deterministic_vs_deterministic_again"]
    ok = det is not None and det["same_bits"] and all("failed" not in r for r in runs.values())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
