#!/usr/bin/env python3
"""Every trellis-controller the scripts start names its gRPC and /metrics ports.

A controller left to a default port (gRPC 127.0.0.1:50151, /metrics
127.0.0.1:9152) does not start beside a demo left up, which holds them. So
each start in tests/, bench/ and deploy/ passes --listen and --metrics-listen
(port 0 or "off" for the suite's own; the demo names its defaults on purpose), here or
in the --config file the script writes.

  controller_starts_own_ports.py REPO [FILE...]   (files: check only those)
"""
import pathlib
import re
import sys

# A command line that runs the binary: a path or name ending in
# trellis-controller followed by an argument, not `ninja ... trellis-controller`.
START = re.compile(r'trellis-controller"?\s+(--|\\$)')
NEEDED = ("--listen", "--metrics-listen")


def commands(text):
    """Yields (line number, the whole command) for each start, continuation lines joined."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = START.search(line)
        if not match or line.lstrip().startswith("#"):
            continue
        # A path, not a command: assigned (X=.../trellis-controller \) or one of
        # a `for` loop's words.
        word = line[:match.start()].split()[-1:] or [""]
        if "=" in word[0] or line.lstrip().startswith("for ") or "pkill" in line:
            continue
        command, j = line, i
        while command.rstrip().endswith("\\") and j + 1 < len(lines):
            j += 1
            command = command.rstrip()[:-1] + " " + lines[j]
        yield i + 1, command


def problems(path):
    out = []
    text = path.read_text(errors="replace")
    # A start from a --config file the script writes: the file's keys name the ports.
    config_keys = all(re.search(r'^' + flag[2:] + r' = ', text, re.M) for flag in NEEDED)
    for number, command in commands(text):
        if "--config" in command and config_keys:
            continue
        missing = [flag for flag in NEEDED if not re.search(re.escape(flag) + r'[\s=]', command)]
        if missing:
            out.append(f"{path}:{number}: trellis-controller started without {', '.join(missing)}")
    return out


def main():
    repo = pathlib.Path(sys.argv[1])
    if len(sys.argv) > 2:
        files = [pathlib.Path(f) for f in sys.argv[2:]]
    else:
        files = [p for d in ("tests", "bench", "deploy") for p in sorted((repo / d).rglob("*"))
                 if p.is_file() and (p.suffix in (".sh", "") and not p.name.endswith(".md"))]
    found = [p for p in files if any(commands(p.read_text(errors="replace")))]
    bad = [line for p in found for line in problems(p)]
    for line in bad:
        print(line)
    if not found:
        print("no controller start found: the pattern is stale")
        return 1
    print(f"{len(found)} file(s) start trellis-controller; {len(bad)} without their own ports")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
