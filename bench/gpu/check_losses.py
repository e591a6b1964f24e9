#!/usr/bin/env python3
"""One GPU-vs-CPU check of bench/gpu/run.sh: the losses of tiny-moe trained on
the GPU (fp32, bf16) against the CPU fp32 reference, step by step.

Usage: check_losses.py BASE NAME
Reads BASE.{cpu.float32,cuda.float32,cuda.bfloat16}.jsonl (trellis-train
--json) and the two runs that measure rounding alone on the same trajectory,
BASE.cpu.float32.1thread.jsonl (the reference in another reduction order) and
BASE.cuda.float32.again.jsonl (the GPU fp32 run repeated). Prints one line per
GPU dtype and one per rounding yardstick, writes BASE.check.json, and exits 1
when a dtype's largest relative loss difference is over its tolerance (the
yardsticks are printed, never judged: they say whether a failure is a bug or a
horizon long enough for routing to amplify rounding).
"""
import json
import sys

from loss_records import first_step_over, records_of, relative_diffs

TOLERANCES = {"cuda.float32": 1e-3, "cuda.bfloat16": 2e-2}


def losses(path):
    out = [r["loss"] for r in records_of(path) if "loss" in r]
    if not out:
        raise SystemExit(f"check: no step records in {path}")
    return out


def compare(got, ref):
    """Relative differences step by step; a run of another length is refused."""
    if len(got) != len(ref):
        raise SystemExit(f"check: {len(got)} steps against {len(ref)} in the reference")
    return relative_diffs(got, ref)


def main():
    base, name = sys.argv[1], sys.argv[2]
    ref = losses(f"{base}.cpu.float32.jsonl")
    result = dict(check=name, steps=len(ref), variants={})
    failed = False
    for variant, tol in TOLERANCES.items():
        got = losses(f"{base}.{variant}.jsonl")
        diffs = compare(got, ref)
        worst = max(diffs)
        ok = worst <= tol
        failed |= not ok
        over = first_step_over(diffs, tol)
        result["variants"][variant] = dict(
            tolerance=tol, max_rel_loss_diff=worst, worst_step=diffs.index(worst) + 1,
            first_step_over_tolerance=over, step1_rel_loss_diff=diffs[0],
            last=got[-1], reference_last=ref[-1], ok=ok)
        print(f"check {name}: {variant} vs cpu.float32 over {len(ref)} steps: max rel loss diff "
              f"{worst:.2e} at step {diffs.index(worst) + 1} (tolerance {tol:g}"
              + (f", first over at step {over}" if over else "")
              + f"), step 1 {diffs[0]:.1e}, last {got[-1]:.4f} vs {ref[-1]:.4f}: "
              f"{'ok' if ok else 'FAILED'}")
    result["rounding"] = {}
    for label, variant, other in (("cpu.float32 at 1 thread", "cpu.float32.1thread", "cpu.float32"),
                                  ("cuda.float32 run twice", "cuda.float32.again", "cuda.float32")):
        drift = compare(losses(f"{base}.{variant}.jsonl"), losses(f"{base}.{other}.jsonl"))
        apart = first_step_over(drift, 0.0)
        result["rounding"][variant] = dict(against=other, max_rel_loss_diff=max(drift),
                                           first_step_apart=apart)
        print(f"check {name}: {label}: max rel loss diff {max(drift):.2e} from {other}"
              + (f", apart from step {apart}" if apart else ", the same losses")
              + " (rounding alone)")
    with open(f"{base}.check.json", "w") as f:
        json.dump(result, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
