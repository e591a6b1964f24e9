#!/usr/bin/env python3
"""What checkpoints cost a training run: written in place vs behind the steps.

Trains one model three times from the same start with trellis-train --json:
  none      no checkpoints;
  in_place  every EVERY steps a checkpoint written in place (the steps wait);
  behind    the same checkpoints with checkpoint.async = true (a copy in host
            memory, written by a thread while the steps go on).
For each: the training time (the steps plus the time the rank stood for
checkpoints after them, from the step records), its share over `none`, the
median step outside and right after checkpoints, each checkpoint's write
time (the rank's log), and the process's peak resident memory (the host copy
of `behind` shows there), and where the step after a checkpoint began spends
its time (forward, backward, optimizer, from the records). Checkpoints go to
DIR (the disk measured); each variant's directory is removed after it.
With PROFILE=1 (trellis-train built with -DTRELLIS_KERNEL_PROFILE=ON) the
step that begins a checkpoint (PROFILE_AT, default the first: EVERY) and the
next are profiled in `none` and `behind`: their kernels, the device's idle
time, and the host calls and device copies of 1 ms or more (what the host
stood waiting in, and when), OUT/NAME-profile-<variant>.txt. The JSON lists
each step after a checkpoint began (`step_seconds_after_begin`), the table too.

Usage: bench/checkpoint/behind.py            (or: behind.py --table RESULT.json: the table again)
  env: BUILD_DIR=build SPEC=examples/moe-bench.toml LAYERS=2 GLOBAL_BATCH=16 MICRO_BATCH=2
       STEPS=70 EVERY=20 DEVICE=cuda VOCAB=32000 DIR=<temp dir> OUT=bench/results
       NAME=checkpoint-behind-<date> MACHINE=<words> PROFILE=0 PROFILE_AT=EVERY AT_END=0
Writes OUT/NAME.json and OUT/NAME.md.
"""
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import machine  # noqa: E402  (bench/machine.py: the machine and date every result records)

ENV = os.environ
BUILD_DIR = ENV.get("BUILD_DIR", "build")
SPEC = ENV.get("SPEC", "examples/moe-bench.toml")
LAYERS = int(ENV.get("LAYERS", "2"))
GLOBAL_BATCH = int(ENV.get("GLOBAL_BATCH", "16"))
MICRO_BATCH = int(ENV.get("MICRO_BATCH", "2"))
# Not a multiple of EVERY: the last checkpoint is then not the run's end, which
# would wait for its write whatever the variant.
STEPS = int(ENV.get("STEPS", "70"))
EVERY = int(ENV.get("EVERY", "20"))
DEVICE = ENV.get("DEVICE", "cuda")
VOCAB = int(ENV.get("VOCAB", "32000"))
OUT = ENV.get("OUT", "bench/results")
NAME = ENV.get("NAME", "checkpoint-behind-" + datetime.date.today().isoformat())
PROFILE = ENV.get("PROFILE", "0") == "1"
PROFILE_AT = int(ENV.get("PROFILE_AT", str(EVERY)))
if PROFILE and (PROFILE_AT % EVERY or not 0 < PROFILE_AT < STEPS):
    sys.exit(f"PROFILE_AT={PROFILE_AT}: a step that begins a checkpoint (a multiple of "
             f"EVERY={EVERY}) below STEPS={STEPS}")
# AT_END=1: a checkpoint at the run's end too (checkpoint.at_end), written in
# place; behind the steps a save still in flight then is abandoned for it.
AT_END = ENV.get("AT_END", "0") == "1"
VARIANTS = ("none", "in_place", "behind")
PARTS = ("fwd_seconds", "bwd_seconds", "optim_seconds")


def set_key(text, section, key, value):
    """`key = value` in [section] of a TOML text: replaced, or added at its top."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == f"[{section}]"), None)
    if start is None:
        lines += ["", f"[{section}]"]
        start = len(lines) - 1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    for i in range(start + 1, end):
        if re.match(rf"\s*{key}\s*=", lines[i]):
            lines[i] = f"{key} = {value}"
            return "\n".join(lines) + "\n"
    lines.insert(start + 1, f"{key} = {value}")
    return "\n".join(lines) + "\n"


def spec_text(variant):
    text = open(os.path.join(ROOT, SPEC)).read()
    text = set_key(text, "model", "layers", LAYERS)
    text = set_key(text, "training", "global_batch", GLOBAL_BATCH)
    text = set_key(text, "training", "micro_batch", MICRO_BATCH if MICRO_BATCH else 0)
    text = set_key(text, "training", "steps", STEPS)
    text = set_key(text, "training", "device", json.dumps(DEVICE))
    text = set_key(text, "checkpoint", "every_steps", EVERY)
    text = set_key(text, "checkpoint", "keep", 1)
    text = set_key(text, "checkpoint", "at_end", "true" if AT_END else "false")
    return set_key(text, "checkpoint", "async", "true" if variant == "behind" else "false")


def run(variant, work, corpus):
    spec = os.path.join(work, f"{variant}.toml")
    open(spec, "w").write(spec_text(variant))
    ckpt = os.path.join(work, "ckpt-" + variant)
    cmd = [os.path.join(BUILD_DIR, "bin", "trellis-train"), spec, "--data", corpus, "--json"]
    if variant != "none":
        cmd += ["--checkpoint-dir", ckpt]
    out_path, err_path = os.path.join(work, variant + ".out"), os.path.join(work, variant + ".err")
    env = dict(ENV)
    profile = os.path.join(work, variant + ".kernels.tsv")
    if PROFILE and variant != "in_place":
        env.update(TRELLIS_PROFILE_STEPS=f"{PROFILE_AT}:2", TRELLIS_PROFILE_OUT=profile,
                   TRELLIS_PROFILE_HOST="1")
    start = time.monotonic()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        # This child's own peak resident set (ru_maxrss, KiB), not the most of all children.
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    stdout, stderr = open(out_path).read(), open(err_path).read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{variant}: trellis-train exited {code}:\n{stderr[-3000:]}")
    peak_kib = usage.ru_maxrss
    shutil.rmtree(ckpt, ignore_errors=True)
    records = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    if len(records) != STEPS:
        sys.exit(f"{variant}: {len(records)} step records, expected {STEPS}")
    writes = [float(m.group(1)) for m in re.finditer(
        r"checkpoint step \d+ written (?:behind the steps )?in ([0-9.]+) s", stderr)]
    waited = [float(m.group(1)) for m in re.finditer(r"the steps waited ([0-9.]+) s", stderr)]
    sizes = [float(m.group(1)) for m in re.finditer(r"s: ([0-9.]+) GiB \(", stderr)]
    # Behind the steps from a GPU: Begin until the state was all in host memory.
    copies = [float(m.group(1)) for m in re.finditer(
        r"the copy to host memory took ([0-9.]+) s", stderr)]
    steps = [r["step_seconds"] for r in records]
    ckpt_s = [r.get("checkpoint_seconds", 0.0) for r in records]
    # AT_END: the last checkpoint, written in place after the last step's record.
    end = re.search(rf"checkpoint step {STEPS} written in ([0-9.]+) s", stderr)
    end_s = float(end.group(1)) if end else 0.0
    abandoned = len(re.findall(r"written behind the steps: abandoned for step", stderr))
    # Steps whose previous step began a checkpoint: what a write behind them
    # costs the steps it overlaps.
    after_i = [i for i in range(1, STEPS) if records[i - 1]["step"] % EVERY == 0]
    outside_i = [i for i in range(1, STEPS)
                 if records[i - 1]["step"] % EVERY != 0 and records[i]["step"] % EVERY != 0]
    after, outside = [steps[i] for i in after_i], [steps[i] for i in outside_i]
    # Steps 2 .. EVERY - 1: with `behind`, the host copy's memory is made meanwhile.
    first = steps[1:EVERY - 1]

    def parts(indices):
        return {k: statistics.median(records[i][k] for i in indices) if indices else None
                for k in PARTS}

    if PROFILE and os.path.exists(profile):
        kernels = os.path.join(OUT, f"{NAME}-profile-{variant}.txt")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gpu", "kernel_table.py"),
                        profile, "2", kernels], check=True, stdout=subprocess.DEVNULL)
        with open(kernels, "a") as f:
            f.write(f"\nsteps {PROFILE_AT} and {PROFILE_AT + 1} (a checkpoint began after step "
                    f"{PROFILE_AT})\n")
            f.write(open(profile + ".timeline.txt").read())
            f.write("\n" + open(profile + ".long.txt").read())
    return {
        "variant": variant,
        "wall_seconds": wall,
        # The records' checkpoint time; behind the steps the log's waits add
        # what came after the last step (the run's end waits for a write).
        "stood_seconds": (sum(waited) if waited else sum(ckpt_s)) + end_s,
        "train_seconds": sum(steps) + (sum(waited) if waited else sum(ckpt_s)) + end_s,
        "end_checkpoint_seconds": end_s,
        "abandoned_saves": abandoned,
        "step_seconds_sum": sum(steps),
        "checkpoint_seconds_sum": sum(ckpt_s),
        "checkpoints": len(writes),
        "checkpoint_write_seconds": writes,
        "checkpoint_waited_seconds": waited,
        "checkpoint_gib": sizes[0] if sizes else 0.0,
        "copy_to_host_seconds": copies,
        "step_seconds_median_outside": statistics.median(outside) if outside else None,
        "step_seconds_median_after_begin": statistics.median(after) if after else None,
        # Each of them, by step: whether one checkpoint's step stands apart.
        "step_seconds_after_begin": {records[i]["step"]: steps[i] for i in after_i},
        "step_seconds_median_first_window": statistics.median(first) if first else None,
        # Medians of the step records' parts (GPU time between the step's marks).
        "step_parts_median_outside": parts(outside_i),
        "step_parts_median_after_begin": parts(after_i),
        "arena_seconds": [float(m.group(1)) for m in re.finditer(
            r"host copy's memory took ([0-9.]+) s", stderr)],
        "peak_rss_gib": peak_kib / (1 << 20),
        "tokens_per_step": records[0]["tokens"],
        "losses_last": records[-1]["loss"],
    }


def table(runs, meta):
    base = next(r for r in runs if r["variant"] == "none")["train_seconds"]
    out = [
        "# What checkpoints cost a run: written in place vs behind the steps",
        "",
        f"- Date: {meta['date']}",
        f"- Machine: {meta['machine']}",
        f"- Command: `{meta['command']}`",
        f"- Model: `{SPEC}` at {LAYERS} layers, global_batch {GLOBAL_BATCH} "
        f"(micro_batch {MICRO_BATCH}), {STEPS} steps, a checkpoint every {EVERY} steps "
        f"(keep 1, {'one at the end, written in place' if AT_END else 'none at the end'}), "
        f"on {DEVICE}; checkpoints on the machine's local disk",
        "- Training time: the steps' `step_seconds` plus the time the rank stood for checkpoints "
        "(the records' `checkpoint_seconds`; behind the steps the log's waits, which add the end "
        "of the run waiting for the last write); start-up excluded; overhead is over `none`",
        "",
        "| variant | training s | overhead | stood for checkpoints s | checkpoints | GiB each | "
        "write s (each) | median step s | median step after a checkpoint began s | "
        f"median step, steps 2-{EVERY - 1} s | peak resident GiB | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        over = r["train_seconds"] / base - 1
        writes = ", ".join(f"{w:.1f}" for w in r["checkpoint_write_seconds"]) or "-"
        after = r["step_seconds_median_after_begin"]
        out.append(
            f"| {r['variant']} | {r['train_seconds']:.1f} | {over * 100:+.1f}% | "
            f"{r['stood_seconds']:.2f} | {r['checkpoints']} | "
            f"{r['checkpoint_gib']:.2f} | {writes} | {r['step_seconds_median_outside']:.3f} | "
            f"{'-' if after is None else f'{after:.3f}'} | "
            f"{r['step_seconds_median_first_window']:.3f} | {r['peak_rss_gib']:.1f} | "
            f"{r['wall_seconds']:.1f} |")
    inp = next(r for r in runs if r["variant"] == "in_place")
    beh = next(r for r in runs if r["variant"] == "behind")
    if all("step_parts_median_after_begin" in r for r in runs):
        out += ["", "| variant | forward s | backward s | optimizer s | "
                "the step after a checkpoint began: forward s | backward s | optimizer s |",
                "|---|---|---|---|---|---|---|"]
        for r in runs:
            cells = [r["step_parts_median_outside"][k] for k in PARTS] + \
                    [r["step_parts_median_after_begin"][k] for k in PARTS]
            out.append(f"| {r['variant']} | " + " | ".join(
                "-" if c is None else f"{c:.3f}" for c in cells) + " |")
    if all(r.get("step_seconds_after_begin") for r in runs):
        out += ["", "Each step after a checkpoint began, s: " + "; ".join(
            f"{r['variant']} " + ", ".join(f"step {k} {v:.3f}"
                                           for k, v in r["step_seconds_after_begin"].items())
            for r in runs) + "."]
    out += [
        "",
        f"Checkpoints cost the run {inp['stood_seconds']:.1f} s in place and "
        f"{beh['stood_seconds']:.2f} s behind the steps "
        f"({beh['stood_seconds'] - beh['checkpoint_seconds_sum']:.2f} s of it after the last step) "
        f"({(inp['train_seconds'] / base - 1) * 100:.1f}% vs "
        f"{(beh['train_seconds'] / base - 1) * 100:.1f}% of the training time); behind the steps "
        f"held {beh['peak_rss_gib'] - inp['peak_rss_gib']:+.1f} GiB more host memory at its peak "
        f"(the copy of the rank's state"
        + (f"; its memory took {beh['arena_seconds'][0]:.1f} s to make, beside the first steps"
           if beh["arena_seconds"] else "")
        + ("; the copy to host memory took " + ", ".join(f"{c:.2f}" for c in beh["copy_to_host_seconds"])
           + " s" if beh.get("copy_to_host_seconds") else "")
        + ")"
        + (f". The last checkpoint, in place at the end, took {inp.get('end_checkpoint_seconds', 0):.1f} s "
           f"and {beh.get('end_checkpoint_seconds', 0):.1f} s behind the steps, where "
           f"{beh.get('abandoned_saves', 0)} save(s) still in flight were abandoned for it"
           if AT_END else "")
        + ". Last losses: " + ", ".join(f"{r['losses_last']:.6f}" for r in runs)
        + " (the same bits where the device's kernels are deterministic).",
    ]
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        d = json.load(open(sys.argv[2]))
        globals().update({"SPEC": d["config"]["spec"], "LAYERS": d["config"]["layers"],
                          "GLOBAL_BATCH": d["config"]["global_batch"],
                          "MICRO_BATCH": d["config"]["micro_batch"], "STEPS": d["config"]["steps"],
                          "EVERY": d["config"]["every_steps"], "DEVICE": d["config"]["device"]})
        for r in d["runs"]:
            r.setdefault("stood_seconds", sum(r["checkpoint_waited_seconds"]) or
                         r["checkpoint_seconds_sum"])
            r["train_seconds"] = r["step_seconds_sum"] + r["stood_seconds"]
        print(table(d["runs"], d["meta"]), end="")
        return
    work = ENV.get("DIR") or tempfile.mkdtemp(prefix="trellis-ckpt-behind-")
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, "bench.corpus")
    subprocess.run([os.path.join(BUILD_DIR, "bin", "trellis-corpus"), "synthetic", corpus,
                    str(VOCAB), "2000000"], check=True, stdout=subprocess.DEVNULL)
    runs = []
    for v in VARIANTS:
        print(f"== {v}", file=sys.stderr, flush=True)
        runs.append(run(v, work, corpus))
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    # Checkpoints must not change the training: the same bits on the CPU; on a
    # GPU within run-to-run noise (its kernels are not deterministic by default:
    # over 40 steps of moe-bench the last losses of three runs have spread up
    # to 1.1% on an H100, the same without any checkpoint).
    losses = [r["losses_last"] for r in runs]
    if max(losses) - min(losses) > (0.02 * min(losses) if DEVICE == "cuda" else 0):
        sys.exit("the variants ended at different losses: " + ", ".join(map(str, losses)))
    command = (("AT_END=1 " if AT_END else "") + ("PROFILE=1 " if PROFILE else "") +
               (f"PROFILE_AT={PROFILE_AT} " if PROFILE and PROFILE_AT != EVERY else "") +
               f"LAYERS={LAYERS} GLOBAL_BATCH={GLOBAL_BATCH} MICRO_BATCH={MICRO_BATCH} "
               f"STEPS={STEPS} EVERY={EVERY} DEVICE={DEVICE} SPEC={SPEC} "
               "bench/checkpoint/behind.py")
    gpu = ""
    if DEVICE == "cuda":
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.splitlines()[0].strip()
    meta = {"date": machine.now_utc(), "machine": ENV.get("MACHINE") or machine.describe(gpu),
            "command": command}
    os.makedirs(OUT, exist_ok=True)
    json.dump({"meta": meta, "config": {"spec": SPEC, "layers": LAYERS,
                                        "global_batch": GLOBAL_BATCH, "micro_batch": MICRO_BATCH,
                                        "steps": STEPS, "every_steps": EVERY, "device": DEVICE},
               "runs": runs}, open(os.path.join(OUT, NAME + ".json"), "w"), indent=1)
    md = table(runs, meta)
    open(os.path.join(OUT, NAME + ".md"), "w").write(md)
    print(md)
    if not ENV.get("DIR"):
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
