"""bench/gpu/offload.sh's table: offload_table.py WORK PREFIX COMMAND reads
WORK/offload{0,1}.jsonl (trellis-train --json) and writes PREFIX.{md,json}."""
import json
import statistics
import sys
from datetime import datetime, timezone


def summary(path):
    records = [json.loads(line) for line in open(path)]
    later = records[1:]  # the first step builds caches and plans
    return dict(
        steps=len(records),
        median_step_seconds=statistics.median(r["step_seconds"] for r in later),
        median_fwd_seconds=statistics.median(r["fwd_seconds"] for r in later),
        median_bwd_seconds=statistics.median(r["bwd_seconds"] for r in later),
        tokens_per_second=records[-1]["tokens"] / statistics.median(r["step_seconds"] for r in later),
        allocated_peak_bytes=max(r["mem_allocated_peak_bytes"] for r in later),
        reserved_peak_bytes=max(r["mem_reserved_peak_bytes"] for r in later),
        host_arena_bytes=records[-1].get("host_arena_bytes", 0),
        losses=[r["loss"] for r in records])


def main():
    work, prefix, command = sys.argv[1:4]
    runs = {f"offload_{f}": summary(f"{work}/offload{f}.jsonl") for f in (0, 1)}
    doc = dict(benchmark="offload-gpu", date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               machine="one NVIDIA H200", command=command,
               config="examples/moe-bench.toml with parallel.activation_checkpointing = true",
               runs=runs)
    json.dump(doc, open(prefix + ".json", "w"), indent=1)
    gib = 2 ** 30
    a, b = runs["offload_0"], runs["offload_1"]
    md = [f"# Activation offload on one GPU ({doc['date'][:10]})", "",
          f"- Machine: {doc['machine']}", f"- Command: `{command}`",
          f"- Config: {doc['config']}, `parallel.offload_fraction` 0 against 1 (every layer's "
          "checkpointed input in the host arena), the same weights and batches",
          "- Medians over the steps after the first; peaks over them", "",
          "| | offload 0 | offload 1 |", "|---|---|---|"]
    rows = [("step s", "median_step_seconds", "{:.4f}"), ("forward s", "median_fwd_seconds", "{:.4f}"),
            ("backward s (with recompute)", "median_bwd_seconds", "{:.4f}"),
            ("tokens/s", "tokens_per_second", "{:,.0f}")]
    for name, key, fmt in rows:
        md.append(f"| {name} | {fmt.format(a[key])} | {fmt.format(b[key])} |")
    for name, key in (("allocated peak GiB", "allocated_peak_bytes"),
                      ("reserved peak GiB", "reserved_peak_bytes"),
                      ("host arena GiB", "host_arena_bytes")):
        md.append(f"| {name} | {a[key] / gib:.3f} | {b[key] / gib:.3f} |")
    md.append(f"| first loss | {a['losses'][0]:.5f} | {b['losses'][0]:.5f} |")
    md.append(f"| last loss | {a['losses'][-1]:.5f} | {b['losses'][-1]:.5f} |")
    open(prefix + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
