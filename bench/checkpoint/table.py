#!/usr/bin/env python3
"""Tables bench/checkpoint/run.sh's repeats: the median of each figure per build and device.

Usage: table.py RUNS.jsonl OUT.json COMMAND MACHINE > OUT.md
OUT.json keeps every repeat under "runs" and the medians under "medians", keyed
"<build>/<device>"; when a "base" build ran too, "speedup" holds this build's
rate over the base's for each figure.
"""
import datetime
import json
import statistics
import sys

FIGURES = [("save_s", "save_gib_per_s", "write (save, fsync included)"),
           ("load_page_cache_s", "load_page_cache_gib_per_s", "read from the page cache"),
           ("load_disk_s", "load_disk_gib_per_s", "read from the disk (pages dropped)")]


MEMORY = [("save_host_peak_added_gib", "host memory added at the peak of a write"),
          ("load_host_peak_added_gib", "host memory added at the peak of a read")]


def medians(runs):
    groups = {}
    for r in runs:
        groups.setdefault(f"{r['build']}/{r['device']}", []).append(r)
    out = {}
    for key, rows in groups.items():
        m = {"repeats": len(rows), "state_gib": rows[0]["state_gib"],
             "shard_gib": rows[0]["shard_gib"], "tensors": rows[0]["tensors"],
             "layers": rows[0]["layers"]}
        for seconds, rate, _ in FIGURES:
            m[seconds] = statistics.median(r[seconds] for r in rows)
            m[rate] = statistics.median(r[rate] for r in rows)
        # Memory: the most any repeat added (the first also allocates buffers kept after it).
        for figure, _ in MEMORY:
            if all(figure in r for r in rows):
                m[figure] = max(r[figure] for r in rows)
        out[key] = m
    return out


def main():
    runs_path, json_path, command, machine = sys.argv[1:5]
    runs = [json.loads(line) for line in open(runs_path) if line.strip()]
    if not runs:
        sys.exit("table.py: no runs in " + runs_path)
    med = medians(runs)
    devices = sorted({r["device"] for r in runs})
    speedup = {}
    for d in devices:
        base, this = med.get(f"base/{d}"), med.get(f"this/{d}")
        if base and this:
            speedup[d] = {rate: this[rate] / base[rate] for _, rate, _ in FIGURES}
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    json.dump({"date": date, "machine": machine, "command": command, "runs": runs,
               "medians": med, "speedup": speedup}, open(json_path, "w"), indent=2)
    first = runs[0]
    print(f"# Checkpoint write and read times ({date})\n")
    print(f"Machine: {machine}\n")
    print(f"Command: `{command}`\n")
    print(f"One rank's state of the model at {first['layers']} layers: {first['tensors']} tensors, "
          f"{first['state_gib']:.2f} GiB (parameters and both optimizers' slots, fp32), one shard "
          f"of {first['shard_gib']:.2f} GiB. Times: medians of {max(m['repeats'] for m in med.values())} "
          "repeats; host memory: the most of any repeat (resident set at the peak over before it; the "
          "page cache is not counted). Every load checked equal to what was saved.\n")
    builds = [b for b in ("base", "this") if any(r["build"] == b for r in runs)]
    for d in devices:
        print(f"## State on the {'GPU' if d == 'cuda' else 'CPU'} ({d})\n")
        header = "| | " + " | ".join(builds) + (" | this / base |" if d in speedup else " |")
        print(header)
        print("|---" * (len(builds) + 1 + (d in speedup)) + "|")
        for seconds, rate, label in FIGURES:
            cells = [f"{med[f'{b}/{d}'][seconds]:.2f} s ({med[f'{b}/{d}'][rate]:.2f} GiB/s)"
                     for b in builds if f"{b}/{d}" in med]
            extra = f" | {speedup[d][rate]:.1f}x" if d in speedup else ""
            print(f"| {label} | " + " | ".join(cells) + extra + " |")
        for key, label in MEMORY:
            if all(key in med.get(f"{b}/{d}", {}) for b in builds):
                cells = [f"{med[f'{b}/{d}'][key]:.2f} GiB" for b in builds]
                print(f"| {label} | " + " | ".join(cells) + (" | |" if d in speedup else " |"))
        print()


if __name__ == "__main__":
    main()
