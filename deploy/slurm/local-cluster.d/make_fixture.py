#!/usr/bin/env python3
"""The memory fixture writer of local-cluster (`make-fixture`, `fixture --free-gib`).

Writes a fake sysfs tree, OUT/devices/system/node/, as the worker's memory probe reads it:
nodeN/meminfo in the exact per-node format of Linux (drivers/base/node.c: "Node %d %-16s%8lu kB",
hugetlb lines "%5u" without a unit), nodeN/cpulist, and the node masks online, possible,
has_cpu, has_memory and has_normal_memory in the kernel's list format (0-3,12).

  make_fixture.py OUT --free-gib F[,F...] [--unattributed-gib U[,U...]] [--total-gib T]
                      [--cpus-per-socket C] [--gh200-hbm]

One socket (a NUMA node with CPUs) per free value: T GiB (default 119.7), F GiB free, U GiB used
by no category (default 8.0; one value for every socket or one per socket), the rest spread over
page cache, anon, slab, kernel stack and page tables so that the counters add up as in Linux.
--gh200-hbm adds one CPU-less HBM node per socket (96.0 GiB, 95.4 free), numbered S + 8*i as
on GH200. GiB become kB as round(GiB * 1048576). Every value is checked before anything is
written; errors go to stderr with exit status 1. Standard library only: it runs before the
project is built.
"""

import os
import re
import sys

PROG = "local-cluster"  # this is a part of deploy/slurm/local-cluster and speaks as it
KB_PER_GIB = 1048576
# A GH200 Hopper's HBM as Linux reports it: a CPU-less node of movable memory only.
HBM_TOTAL_GIB, HBM_FREE_GIB, HBM_UNATTRIBUTED_GIB = "96.0", "95.4", "0.2"
# Room for the MIG partitions' nodes between two HBM nodes.
HBM_NODE_STRIDE = 8


class FixtureError(Exception):
    pass


def gib_to_kb(text):
    """round(GiB * 1048576) for a plain decimal ("108", "72.7"); None for anything else."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
        return None
    return int("%.0f" % (float(text) * KB_PER_GIB))


def split_list(text):
    """F[,F...] as bash's `IFS=, read -a` splits it: a trailing empty field is dropped."""
    fields = text.split(",")
    if len(fields) > 1 and fields[-1] == "":
        fields.pop()
    return fields


def meminfo_fields(total, free, unattributed):
    """(label, kB) of one node's meminfo. Used - unattributed is spread over the categories;
    Shmem is part of FilePages (as in Linux), so the attributed sum is
    FilePages + AnonPages + Slab + KernelStack + PageTables."""
    used = total - free
    if free > total:
        raise FixtureError("free (%d kB) exceeds total (%d kB)" % (free, total))
    if unattributed > used:
        raise FixtureError("unattributed (%d kB) exceeds used (%d kB)" % (unattributed, used))
    a = used - unattributed
    shmem = a * 2 // 100
    file_lru = a * 48 // 100
    active_file = file_lru * 2 // 3
    inactive_file = file_lru - active_file
    filepages = file_lru + shmem
    anon = a * 25 // 100
    anon_lru = anon + shmem
    active_anon = anon_lru * 85 // 100
    inactive_anon = anon_lru - active_anon
    slab = a * 21 // 100
    sreclaimable = slab * 60 // 100
    sunreclaim = slab - sreclaimable
    kstack = a * 2 // 100
    pagetables = a - filepages - anon - slab - kstack
    return [
        ("MemTotal:", total), ("MemFree:", free), ("MemUsed:", used), ("SwapCached:", 0),
        ("Active:", active_anon + active_file), ("Inactive:", inactive_anon + inactive_file),
        ("Active(anon):", active_anon), ("Inactive(anon):", inactive_anon),
        ("Active(file):", active_file), ("Inactive(file):", inactive_file),
        ("Unevictable:", 0), ("Mlocked:", 0), ("Dirty:", 128 if a > 0 else 0),
        ("Writeback:", 0), ("FilePages:", filepages), ("Mapped:", filepages // 5),
        ("AnonPages:", anon), ("Shmem:", shmem), ("KernelStack:", kstack),
        ("PageTables:", pagetables), ("SecPageTables:", 0), ("NFS_Unstable:", 0),
        ("Bounce:", 0), ("WritebackTmp:", 0), ("KReclaimable:", sreclaimable),
        ("Slab:", slab), ("SReclaimable:", sreclaimable), ("SUnreclaim:", sunreclaim),
        ("AnonHugePages:", 0), ("ShmemHugePages:", 0), ("ShmemPmdMapped:", 0),
        ("FileHugePages:", 0), ("FilePmdMapped:", 0),
    ]


def render_meminfo(node, total, free, unattributed):
    lines = ["Node %d %-16s%8d kB\n" % (node, label, kb)
             for label, kb in meminfo_fields(total, free, unattributed)]
    lines += ["Node %d HugePages_Total: %5d\n" % (node, 0),
              "Node %d HugePages_Free:  %5d\n" % (node, 0),
              "Node %d HugePages_Surp:  %5d\n" % (node, 0)]
    return "".join(lines)


def int_list(ids):
    """An ascending list of ids in the kernel's list format: [0, 1, 2, 3, 12] -> "0-3,12"."""
    runs = []
    for x in ids:
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)


def parse_args(argv):
    """The options of make-fixture, checked in the order local-cluster always checked them."""
    opts = {"free": "", "unattributed": "8.0", "total": "119.7", "cps": "2", "hbm": False}
    valued = {"--free-gib": "free", "--unattributed-gib": "unattributed",
              "--total-gib": "total", "--cpus-per-socket": "cps"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in valued:
            if i + 1 >= len(argv) or argv[i + 1] == "":
                raise FixtureError("%s needs a value" % arg)
            opts[valued[arg]] = argv[i + 1]
            i += 2
        elif arg == "--gh200-hbm":
            opts["hbm"] = True
            i += 1
        else:
            raise FixtureError("make-fixture: unknown option '%s'" % arg)
    if not opts["free"]:
        raise FixtureError("make-fixture: --free-gib is required")
    if not re.fullmatch(r"[1-9][0-9]*", opts["cps"]):
        raise FixtureError("--cpus-per-socket must be a positive integer")
    return opts


def plan_tree(opts):
    """{path relative to devices/system/node: content} for the parsed options."""
    frees = split_list(opts["free"])
    unattrs = split_list(opts["unattributed"])
    sockets = len(frees)
    if len(unattrs) == 1 and sockets > 1:
        unattrs = unattrs * sockets
    if len(unattrs) != sockets:
        raise FixtureError("--unattributed-gib needs one value or one per socket (%d)" % sockets)
    total = gib_to_kb(opts["total"])
    if total is None:
        raise FixtureError("bad --total-gib '%s'" % opts["total"])
    cps = int(opts["cps"])
    files, online, cpu_nodes = {}, [], []
    for i in range(sockets):
        free = gib_to_kb(frees[i])
        if free is None:
            raise FixtureError("bad free value '%s'" % frees[i])
        unattr = gib_to_kb(unattrs[i])
        if unattr is None:
            raise FixtureError("bad unattributed value '%s'" % unattrs[i])
        files["node%d/meminfo" % i] = render_meminfo(i, total, free, unattr)
        files["node%d/cpulist" % i] = "%d-%d\n" % (i * cps, i * cps + cps - 1)
        online.append(i)
        cpu_nodes.append(i)
    possible_max = sockets - 1
    if opts["hbm"]:
        hbm = [gib_to_kb(g) for g in (HBM_TOTAL_GIB, HBM_FREE_GIB, HBM_UNATTRIBUTED_GIB)]
        for i in range(sockets):
            n = sockets + HBM_NODE_STRIDE * i
            files["node%d/meminfo" % n] = render_meminfo(n, *hbm)
            files["node%d/cpulist" % n] = "\n"
            online.append(n)
        possible_max = sockets + HBM_NODE_STRIDE * sockets - 1
    files["online"] = int_list(online) + "\n"
    files["has_memory"] = int_list(online) + "\n"
    files["has_cpu"] = int_list(cpu_nodes) + "\n"
    # Only the sockets have normal (non-movable) memory.
    files["has_normal_memory"] = int_list(cpu_nodes) + "\n"
    files["possible"] = int_list(range(possible_max + 1)) + "\n"
    return files


def write_tree(out, files):
    base = os.path.join(out, "devices", "system", "node")
    for rel, content in files.items():
        path = os.path.join(base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)


def main(argv):
    if not argv or not argv[0]:
        print("%s: error: usage: %s make-fixture OUT --free-gib F[,F...] ..." % (PROG, PROG),
              file=sys.stderr)
        return 1
    try:
        write_tree(argv[0], plan_tree(parse_args(argv[1:])))
    except FixtureError as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
