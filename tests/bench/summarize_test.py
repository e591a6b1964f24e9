#!/usr/bin/env python3
"""bench/gpu/summarize.py (run.sh's table) on made-up run files: the ratios and
the issue's targets from known figures, and a target whose reference run was
not benched reported as not judged rather than missed."""
import json, os, subprocess, sys, tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench/gpu/summarize.py")
TOKENS = 16384


def trellis(path, step_s, losses, peak):
    with open(path, "w") as f:
        f.write("not a record\n")  # other output on stdout is skipped
        for loss in losses:
            f.write(json.dumps(dict(step_seconds=step_s, fwd_seconds=step_s * 0.3,
                                    bwd_seconds=step_s * 0.5, optim_seconds=step_s * 0.2,
                                    loss=loss, mem_allocated_peak_bytes=peak,
                                    mem_reserved_peak_bytes=peak, alloc_retries=0)) + "\n")


def pytorch(path, name, tokens_per_s, losses, peak):
    json.dump(dict(implementation=name, tokens_per_s=tokens_per_s, losses=losses,
                   peak_mem_bytes=peak, reserved_bytes=peak, alloc_retries=0,
                   step_seconds_median=TOKENS / tokens_per_s), open(path, "w"))


def summarize(work):
    json.dump(dict(training_flops_per_token=6e9, params=2e9, active_params_per_token=5e8,
                   tokens_per_step=TOKENS, newton_schulz_flops_per_step=1e13, global_batch=2),
              open(os.path.join(work, "info.json"), "w"))
    json.dump(dict(peak_tflops=700.0, device="test", torch="2.x"),
              open(os.path.join(work, "peak.json"), "w"))
    out = os.path.join(work, "summary")
    subprocess.run([sys.executable, SCRIPT, work, out, "cmd", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    return json.load(open(out + ".json")), open(out + ".md").read()


failures = []
def expect(cond, what):
    if not cond:
        failures.append(what)


losses = [10.0 + 0.1 * i for i in range(10)]
with tempfile.TemporaryDirectory() as work:
    # 0.25 s per step after the first: 65,536 tokens/s; compile 50,000; eager 40,000.
    trellis(os.path.join(work, "trellis_kernel_ns.jsonl"), 0.25, losses, 40 << 30)
    pytorch(os.path.join(work, "pytorch_compile_grouped_mm.json"), "compile", 50000.0, losses, 41 << 30)
    pytorch(os.path.join(work, "pytorch_eager_grouped_mm.json"), "eager", 40000.0,
            [x * 1.02 if i == 3 else x for i, x in enumerate(losses)], 45 << 30)
    doc, md = summarize(work)
    r, t = doc["runs"]["trellis_kernel_ns"], doc["targets"]
    expect(abs(r["tokens_per_s"] - 65536) < 1e-6, f"tokens/s {r['tokens_per_s']}")
    expect(abs(r["ratio_vs_compile"] - 65536 / 50000) < 1e-9, f"vs compile {r['ratio_vs_compile']}")
    expect(abs(r["ratio_vs_pytorch"] - 65536 / 40000) < 1e-9, f"vs eager {r['ratio_vs_pytorch']}")
    expect(t["judged_run"] == "trellis_kernel_ns", f"judged {t['judged_run']}")
    expect(t["tokens_per_s >= 1.2 x torch.compile"] is True, "1.31x compile is met")
    expect(t["peak allocated <= torch.compile's"] is True, "40 <= 41 GiB is met")
    # Step 4's loss is 2% off eager's: missed.
    expect(t["loss at each of the first 8 steps within 1% of pytorch eager"] is False,
           "a 2% loss gap is missed")
    expect("| MISSED |" in md and "not judged" not in md, "the table's verdicts:\n" + md)

with tempfile.TemporaryDirectory() as work:
    trellis(os.path.join(work, "trellis_kernel_ns.jsonl"), 0.25, losses, 40 << 30)
    doc, md = summarize(work)
    t = doc["targets"]
    for k in ("tokens_per_s >= 1.2 x torch.compile", "peak allocated <= torch.compile's",
              "loss at each of the first 8 steps within 1% of pytorch eager"):
        expect(t[k] is None, f"{k}: {t[k]} without its reference run, expected None")
    expect(t["alloc_retries == 0"] is True, "alloc retries 0 is met")
    expect("MISSED" not in md and md.count("not judged") == 3, "the table's verdicts:\n" + md)

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok")
