#!/usr/bin/env python3
"""Series count at a given scale, computed from live /metrics of the controller and of one
worker: each series is counted per rank (it has a `rank` label), per socket (`socket`, no
rank), per node (`node` only: a struck node), per run (`run` only) or per process (none), then
scaled to GPUS ranks on GPUS/GPUS_PER_NODE nodes of SOCKETS sockets, one run, no node struck.
With --readme, the README's sentence "At 1,536 GPUs ... N series in all" must state the result.

  series_count.py --controller c.prom --worker w.prom [--gpus 1536] [--readme README.md]
"""
import argparse
import json
import re
import sys


def series(path):
    out = []
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        name, _, rest = line.partition("{")
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest.rpartition("}")[0])) if rest else {}
        out.append((name.split()[0], labels))
    return out


def classify(rows):
    kinds = {"rank": [], "socket": [], "node": [], "run": [], "process": []}
    for name, labels in rows:
        if "rank" in labels:
            kinds["rank"].append(labels)
        elif "socket" in labels:
            kinds["socket"].append(labels)
        elif "node" in labels:
            kinds["node"].append(labels)
        elif "run" in labels:
            kinds["run"].append(labels)
        else:
            kinds["process"].append(labels)
    return kinds


def per(kind_rows, key):
    units = {key(l) for l in kind_rows}
    return len(kind_rows) / len(units) if units else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--controller", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--gpus", type=int, default=1536)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--sockets", type=int, default=4)
    ap.add_argument("--readme")
    a = ap.parse_args()
    nodes = a.gpus // a.gpus_per_node
    w, c = classify(series(a.worker)), classify(series(a.controller))
    worker_per_rank = per(w["rank"], lambda l: (l["node"], l["rank"]))
    worker_per_process = len(w["process"]) + len(w["node"]) + len(w["socket"]) + len(w["run"])
    ctl_per_socket = per(c["socket"], lambda l: (l.get("node"), l["socket"]))
    ctl_per_run = per(c["run"], lambda l: l["run"])
    workers = round(worker_per_rank * a.gpus + worker_per_process * nodes)
    controller = round(ctl_per_socket * nodes * a.sockets + ctl_per_run + len(c["process"]))
    total = workers + controller
    doc = {"gpus": a.gpus, "nodes": nodes, "sockets_per_node": a.sockets,
           "worker_series_per_rank": worker_per_rank, "worker_series_per_process": worker_per_process,
           "controller_series_per_socket": ctl_per_socket, "controller_series_per_run": ctl_per_run,
           "controller_series_fixed": len(c["process"]),
           "workers": workers, "controller": controller, "total": total}
    print(json.dumps(doc))
    if a.readme:
        text = open(a.readme).read()
        m = re.search(r"At ([\d,]+) GPUs .*?([\d,]+) series in all", text, re.S)
        if not m:
            sys.exit(f"{a.readme}: no sentence 'At N GPUs ... M series in all'")
        stated = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
        if stated != (a.gpus, total):
            sys.exit(f"{a.readme} says {stated[1]:,} series at {stated[0]:,} GPUs; the families "
                     f"give {total:,} (workers {workers:,}, controller {controller:,})")


if __name__ == "__main__":
    main()
