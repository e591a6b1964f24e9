#!/usr/bin/env python3
"""Tests of the local cluster's memory fixture writer, deploy/slurm/local-cluster.d/make_fixture.py.

- Every shipped fixture, regenerated through `local-cluster make-fixture` with the command its
  README records, equals the committed tree byte for byte. Those trees were written by the
  writer's earlier bash version, so this also holds the program to that version's output.
- A synthesized tree reads as the worker's probe reads it (worker/io/sysfs_probe.h): the node
  masks, one cpulist per socket, CPU-less HBM nodes, and meminfo lines in Linux's per-node format
  whose figures are the ones asked for and add up as in Linux.
- Bad input fails with a message and writes nothing.
"""

import filecmp
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOCAL_CLUSTER = os.path.join(REPO, "deploy", "slurm", "local-cluster")
WRITER = os.path.join(REPO, "deploy", "slurm", "local-cluster.d", "make_fixture.py")

_spec = importlib.util.spec_from_file_location("make_fixture", WRITER)
make_fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixture)

# A line of a per-node meminfo, as worker/core/memory_probe parses it.
MEMINFO_LINE = re.compile(r"Node (\d+) ([A-Za-z_()]+):\s+(\d+)( kB)?")


def kb(gib):
    return round(gib * 1048576)


def read_meminfo(path):
    """{field: kB} of one meminfo file; fails on a line the probe would refuse."""
    fields = {}
    with open(path) as f:
        for line in f.read().splitlines():
            m = MEMINFO_LINE.fullmatch(line)
            if not m:
                raise AssertionError("%s: malformed line %r" % (path, line))
            fields[(int(m.group(1)), m.group(2))] = int(m.group(3))
    nodes = {node for node, _ in fields}
    if len(nodes) != 1:
        raise AssertionError("%s names nodes %s" % (path, sorted(nodes)))
    return nodes.pop(), {name: value for (_, name), value in fields.items()}


def trees_differ(a, b, rel=""):
    """Relative paths that differ between two directory trees (missing, extra or changed)."""
    cmp = filecmp.dircmp(os.path.join(a, rel), os.path.join(b, rel))
    out = ["only in the new tree: " + os.path.join(rel, x) for x in cmp.left_only]
    out += ["only in the shipped tree: " + os.path.join(rel, x) for x in cmp.right_only]
    _, mismatch, errors = filecmp.cmpfiles(os.path.join(a, rel), os.path.join(b, rel),
                                           cmp.common_files, shallow=False)
    out += ["differs: " + os.path.join(rel, x) for x in mismatch + errors]
    for sub in cmp.common_dirs:
        out += trees_differ(a, b, os.path.join(rel, sub))
    return out


def readme_commands(readme):
    """The `local-cluster make-fixture NAME ARGS...` commands in a README's sh block."""
    text = open(readme).read().replace("\\\n", " ")
    return [shlex.split(line)[2:] for line in text.splitlines()
            if line.startswith("local-cluster make-fixture ")]


class ShippedFixturesTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def test_deploy_fixtures_are_what_their_readme_commands_write(self):
        shipped = os.path.join(REPO, "deploy", "slurm", "fixtures")
        commands = readme_commands(os.path.join(shipped, "README.md"))
        names = sorted(c[0] for c in commands)
        self.assertEqual(names, sorted(d for d in os.listdir(shipped)
                                       if os.path.isdir(os.path.join(shipped, d))))
        for name, *args in commands:
            with self.subTest(fixture=name):
                out = os.path.join(self.tmp, name)
                subprocess.run([LOCAL_CLUSTER, "make-fixture", out] + args, check=True,
                               stdout=subprocess.DEVNULL)
                self.assertEqual(trees_differ(out, os.path.join(shipped, name)), [])

    def test_probe_fixtures_are_what_make_sh_writes(self):
        shipped = os.path.join(REPO, "tests", "fixtures", "sysfs")
        subprocess.run(["bash", os.path.join(shipped, "make.sh"), self.tmp], check=True,
                       stdout=subprocess.DEVNULL)
        made = sorted(os.listdir(self.tmp))
        self.assertEqual(made, sorted(d for d in os.listdir(shipped)
                                      if os.path.isdir(os.path.join(shipped, d))))
        for name in made:
            with self.subTest(fixture=name):
                self.assertEqual(trees_differ(os.path.join(self.tmp, name),
                                              os.path.join(shipped, name)), [])


class SynthesizedTreeTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self._tmp.name, "tree")
        self.base = os.path.join(self.out, "devices", "system", "node")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, *args):
        return subprocess.run([sys.executable, WRITER, self.out] + list(args),
                              capture_output=True, text=True)

    def read(self, rel):
        with open(os.path.join(self.base, rel)) as f:
            return f.read()

    def check_node(self, node, total, free, unattributed):
        got_node, m = read_meminfo(os.path.join(self.base, "node%d" % node, "meminfo"))
        self.assertEqual(got_node, node)
        self.assertEqual(len(m), 36)
        self.assertEqual((m["MemTotal"], m["MemFree"]), (kb(total), kb(free)))
        self.assertEqual(m["MemUsed"], m["MemTotal"] - m["MemFree"])
        attributed = (m["FilePages"] + m["AnonPages"] + m["Slab"] + m["KernelStack"]
                      + m["PageTables"])
        self.assertEqual(m["MemUsed"] - attributed, kb(unattributed))
        self.assertEqual(m["Active"], m["Active(anon)"] + m["Active(file)"])
        self.assertEqual(m["Inactive"], m["Inactive(anon)"] + m["Inactive(file)"])
        self.assertEqual(m["Slab"], m["SReclaimable"] + m["SUnreclaim"])
        self.assertEqual(m["HugePages_Total"], 0)

    def test_sockets_and_hbm_nodes_as_the_probe_reads_them(self):
        r = self.write("--free-gib", "100.5,90", "--unattributed-gib", "3,4.5",
                       "--total-gib", "128", "--cpus-per-socket", "4", "--gh200-hbm")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(self.base)),
                         ["has_cpu", "has_memory", "has_normal_memory", "node0", "node1",
                          "node10", "node2", "online", "possible"])
        self.assertEqual(self.read("online"), "0-2,10\n")
        self.assertEqual(self.read("has_memory"), "0-2,10\n")
        self.assertEqual(self.read("has_cpu"), "0-1\n")
        self.assertEqual(self.read("has_normal_memory"), "0-1\n")
        self.assertEqual(self.read("possible"), "0-17\n")
        self.assertEqual(self.read("node0/cpulist"), "0-3\n")
        self.assertEqual(self.read("node1/cpulist"), "4-7\n")
        self.assertEqual(self.read("node2/cpulist"), "\n")
        self.assertEqual(self.read("node10/cpulist"), "\n")
        self.check_node(0, 128, 100.5, 3)
        self.check_node(1, 128, 90, 4.5)
        self.check_node(2, 96.0, 95.4, 0.2)
        self.check_node(10, 96.0, 95.4, 0.2)

    def test_defaults_one_socket_without_hbm(self):
        r = self.write("--free-gib", "108")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(self.base)),
                         ["has_cpu", "has_memory", "has_normal_memory", "node0", "online",
                          "possible"])
        for mask in ("online", "has_memory", "has_cpu", "has_normal_memory", "possible"):
            self.assertEqual(self.read(mask), "0\n", mask)
        self.assertEqual(self.read("node0/cpulist"), "0-1\n")
        self.check_node(0, 119.7, 108, 8.0)
        self.assertIn("Node 0 MemTotal:       125514547 kB\n", self.read("node0/meminfo"))

    def test_one_unattributed_value_serves_every_socket(self):
        self.assertEqual(self.write("--free-gib", "50,60,70", "--unattributed-gib", "9").returncode,
                         0)
        for node, free in enumerate((50, 60, 70)):
            self.check_node(node, 119.7, free, 9)

    def test_bad_input_fails_and_writes_nothing(self):
        cases = [
            (["--free-gib", "130"], "free (136314880 kB) exceeds total (125514547 kB)"),
            (["--free-gib", "100", "--unattributed-gib", "20"],
             "unattributed (20971520 kB) exceeds used (20656947 kB)"),
            (["--free-gib", "1,2,3", "--unattributed-gib", "1,2"],
             "--unattributed-gib needs one value or one per socket (3)"),
            (["--free-gib", "1,x"], "bad free value 'x'"),
            (["--free-gib", "1e3"], "bad free value '1e3'"),
            (["--free-gib", "1", "--total-gib", "-5"], "bad --total-gib '-5'"),
            (["--free-gib", "1", "--cpus-per-socket", "0"],
             "--cpus-per-socket must be a positive integer"),
            (["--unattributed-gib", "1"], "make-fixture: --free-gib is required"),
            (["--free-gib"], "--free-gib needs a value"),
            (["--free-gib", "1", "--sockets", "2"], "make-fixture: unknown option '--sockets'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.write(*args)
                self.assertEqual(r.returncode, 1)
                self.assertEqual(r.stderr, "local-cluster: error: %s\n" % message)
                self.assertFalse(os.path.exists(self.out))


class PartsTest(unittest.TestCase):
    def test_int_list_is_the_kernels_list_format(self):
        self.assertEqual(make_fixture.int_list([0]), "0")
        self.assertEqual(make_fixture.int_list([0, 1, 2, 3, 4, 12, 20, 28]), "0-4,12,20,28")
        self.assertEqual(make_fixture.int_list([1, 3, 4, 6]), "1,3-4,6")
        self.assertEqual(make_fixture.int_list(range(36)), "0-35")

    def test_gib_to_kb_rounds_and_refuses_anything_but_a_plain_decimal(self):
        self.assertEqual(make_fixture.gib_to_kb("119.7"), 125514547)
        self.assertEqual(make_fixture.gib_to_kb("72.7"), 76231475)
        self.assertEqual(make_fixture.gib_to_kb("0"), 0)
        for bad in ("", "x", "1e3", "-1", "1.", ".5", " 5", "5\n"):
            self.assertIsNone(make_fixture.gib_to_kb(bad), repr(bad))

    def test_lists_split_as_bash_read_does(self):
        self.assertEqual(make_fixture.split_list("1,2"), ["1", "2"])
        self.assertEqual(make_fixture.split_list("1,2,"), ["1", "2"])
        self.assertEqual(make_fixture.split_list("1,,"), ["1", ""])
        self.assertEqual(make_fixture.split_list(","), [""])


if __name__ == "__main__":
    unittest.main()
