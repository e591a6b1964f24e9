#!/usr/bin/env python3
"""bench/gpu/check_losses.py (run.sh's GPU-vs-CPU check) on made-up losses: a
GPU run within tolerance passes, one over it fails with the step it went over,
and a run with fewer steps than the reference is refused."""
import json, os, subprocess, sys, tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench/gpu/check_losses.py")
REF = [10.0 - 0.1 * i for i in range(30)]


def write(base, variant, losses):
    with open(f"{base}.{variant}.jsonl", "w") as f:
        f.write("trellis-train: starting\n")  # other output is skipped
        for loss in losses:
            f.write(json.dumps(dict(step=1, loss=loss)) + "\n")


def run(base):
    return subprocess.run([sys.executable, SCRIPT, base, "t"], capture_output=True, text=True)


failures = []
def expect(cond, what):
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as d:
    base = os.path.join(d, "check_t")
    write(base, "cpu.float32", REF)
    write(base, "cuda.float32", [x * (1 + 1e-5 * i) for i, x in enumerate(REF)])
    write(base, "cuda.float32.again", [x * (1 + 2e-5 * i) for i, x in enumerate(REF)])
    write(base, "cpu.float32.1thread", REF)
    write(base, "cuda.bfloat16", [x * (1 + 5e-3) for x in REF])
    ok = run(base)
    expect(ok.returncode == 0, f"within tolerance: rc {ok.returncode}\n{ok.stdout}{ok.stderr}")
    expect("FAILED" not in ok.stdout, "within tolerance: a FAILED line")
    expect("run twice: max rel loss diff 2.90e-04 from cuda.float32, apart from step 2" in ok.stdout,
           f"the GPU repeat's line: {ok.stdout}")
    expect("at 1 thread: max rel loss diff 0.00e+00 from cpu.float32, the same losses" in ok.stdout,
           f"the CPU thread yardstick's line: {ok.stdout}")
    result = json.load(open(base + ".check.json"))
    expect(result["variants"]["cuda.float32"]["worst_step"] == 30, "worst step")
    expect(abs(result["variants"]["cuda.float32"]["max_rel_loss_diff"] - 2.9e-4) < 1e-9,
           "max rel diff")

    # fp32 goes 2e-3 off from step 22: over 1e-3, the check fails and says where.
    write(base, "cuda.float32", [x * (1 + (2e-3 if i >= 21 else 0)) for i, x in enumerate(REF)])
    bad = run(base)
    expect(bad.returncode == 1, f"over tolerance: rc {bad.returncode}")
    expect("first over at step 22" in bad.stdout and "FAILED" in bad.stdout,
           f"over tolerance: {bad.stdout}")
    expect(json.load(open(base + ".check.json"))["variants"]["cuda.float32"]
           ["first_step_over_tolerance"] == 22, "first step over in JSON")

    write(base, "cuda.bfloat16", REF[:10])
    short = run(base)
    expect(short.returncode not in (0,) and "10 steps against 30" in short.stderr,
           f"short run: rc {short.returncode} {short.stderr}")

for f in failures:
    print("FAIL:", f)
print(f"{'FAILED' if failures else 'passed'}: check_losses_test")
sys.exit(1 if failures else 0)
