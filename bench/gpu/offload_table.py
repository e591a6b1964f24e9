"""bench/gpu/offload.sh's table: offload_table.py WORK PREFIX COMMAND CONFIG reads
WORK/runs (one label per line) and each WORK/<label>.jsonl (trellis-train --json,
or WORK/<label>.err where the run failed) and writes PREFIX.{md,json}."""
import json
import os
import statistics
import sys

sys.path.insert(0, "bench")
import machine  # noqa: E402
from loss_records import drift, records_of  # noqa: E402

GIB = 2 ** 30
# The step-time rows of a runs table (runs_table), shared by the GPU tables.
STEP_ROWS = [("step s", "median_step_seconds", "{:.4f}".format),
             ("forward s", "median_fwd_seconds", "{:.4f}".format),
             ("backward s (with any recompute)", "median_bwd_seconds", "{:.4f}".format),
             ("tokens/s", "tokens_per_second", "{:,.0f}".format),
             ("allocated peak GiB", "allocated_peak_bytes", lambda v: f"{v / GIB:.2f}")]


def how_it_ended(err_path):
    lines = [l.strip() for l in open(err_path)] if os.path.exists(err_path) else []
    text = " ".join(lines)
    if "out of memory" in text.lower():
        return "out of device memory"
    return lines[-1][:200] if lines else "failed without a message"


def summary(work, label):
    records = records_of(f"{work}/{label}.jsonl")
    if len(records) < 2:
        return dict(steps=len(records), failed=how_it_ended(f"{work}/{label}.err"))
    later = records[1:]  # the first step builds caches and plans
    step = statistics.median(r["step_seconds"] for r in later)
    return dict(
        steps=len(records),
        median_step_seconds=step,
        median_fwd_seconds=statistics.median(r["fwd_seconds"] for r in later),
        median_bwd_seconds=statistics.median(r["bwd_seconds"] for r in later),
        tokens_per_second=records[-1]["tokens"] / step,
        # Device memory (CUDA records), and which part of the step sets the peak.
        **{name: max(r[f"mem_{key}_bytes"] for r in later)
           for name, key in [("allocated_peak_bytes", "allocated_peak"),
                             ("reserved_peak_bytes", "reserved_peak"),
                             ("fwd_peak_bytes", "allocated_peak_fwd"),
                             ("bwd_peak_bytes", "allocated_peak_bwd"),
                             ("optim_peak_bytes", "allocated_peak_optim")]
           if all(f"mem_{key}_bytes" in r for r in later)},
        host_arena_bytes=records[-1].get("host_arena_bytes", 0),
        losses=[r["loss"] for r in records])


def cell(run, key, fmt):
    """One run's figure `key` formatted; how it ended in the step-time row of a
    failed run, "-" where it has no such figure."""
    if "failed" in run:
        return run["failed"] if key == "median_step_seconds" else "-"
    if key not in run:
        return "-"
    return "none" if run[key] is None else fmt(run[key])


def runs_table(runs, labels, rows):
    """Markdown lines: a column per run, a line per (name, key, format) of rows."""
    md = ["| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for name, key, fmt in rows:
        md.append(f"| {name} | " + " | ".join(cell(runs[l], key, fmt) for l in labels) + " |")
    return md


def main():
    work, prefix, command, config = sys.argv[1:5]
    labels = [l.strip() for l in open(f"{work}/runs") if l.strip()]
    runs = {label: summary(work, label) for label in labels}
    reference = runs.get("offload_0", {}).get("losses")
    for label, run in runs.items():
        if reference and "losses" in run and label != "offload_0":
            run["first_step_differing_from_offload_0"], run["max_relative_loss_difference"] = \
                drift(run["losses"], reference)
    doc = dict(benchmark="offload-gpu", date=machine.now_utc(),
               machine=machine.describe(os.environ.get("GPU_NAME", "")), command=command,
               config=config, runs=runs)
    json.dump(doc, open(prefix + ".json", "w"), indent=1)

    rows = STEP_ROWS + [
        ("reserved peak GiB", "reserved_peak_bytes", lambda v: f"{v / GIB:.2f}"),
        ("forward's allocated peak GiB", "fwd_peak_bytes", lambda v: f"{v / GIB:.2f}"),
        ("backward's allocated peak GiB", "bwd_peak_bytes", lambda v: f"{v / GIB:.2f}"),
        ("optimizer's allocated peak GiB", "optim_peak_bytes", lambda v: f"{v / GIB:.2f}"),
        ("host arena GiB", "host_arena_bytes", lambda v: f"{v / GIB:.2f}"),
        ("first loss", "losses", lambda v: f"{v[0]:.5f}"),
        ("last loss", "losses", lambda v: f"{v[-1]:.5f}"),
        ("first step whose loss differs from offload_0", "first_step_differing_from_offload_0",
         lambda v: str(v)),
        ("max relative loss difference from offload_0", "max_relative_loss_difference",
         lambda v: f"{v:.2e}")]
    md = [f"# Activation offload on one GPU: {config} ({doc['date'][:10]})", "",
          f"- Machine: {doc['machine']}", f"- Command: `{command}`",
          f"- Config: {config}; every run from the same weights and batches; `offload_F` is "
          "`parallel.offload_fraction` F with activation checkpointing (the first floor(F x layers) "
          "layers' checkpointed inputs in the host arena); `offload_F_again` repeats `offload_F`",
          "- Medians over the steps after the first; peaks over them", ""]
    md += runs_table(runs, labels, rows)
    trained = [l for l in labels if "losses" in runs[l]]
    if trained:
        md += ["", "Losses, step by step:", "", "| step | " + " | ".join(trained) + " |",
               "|---" * (len(trained) + 1) + "|"]
        for i in range(max(len(runs[l]["losses"]) for l in trained)):
            md.append(f"| {i + 1} | " + " | ".join(
                f"{runs[l]['losses'][i]:.5f}" if i < len(runs[l]["losses"]) else "-"
                for l in trained) + " |")
    open(prefix + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
