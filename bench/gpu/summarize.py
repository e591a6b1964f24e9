#!/usr/bin/env python3
"""Builds the trainer-gpu table (Markdown and JSON) from one run's files:
info.json (trellis-export --info), peak.json, trellis.jsonl (trellis-train
--json step records), pytorch_*.json (pytorch_moe.py train).

  summarize.py WORK_DIR OUT_PREFIX "COMMAND" WARMUP
"""
import glob
import json
import os
import statistics
import sys
from datetime import datetime, timezone

# Issue 17's targets: tokens/s against torch.compile, forward + backward against
# the measured bf16 matmul peak, peak memory against compile's, losses against eager's.
TARGET_RATIO_COMPILE, TARGET_FWD_BWD_MFU, TARGET_LOSS_REL = 1.2, 0.5, 0.01
# moe-bench in bf16 at its learning rate meets a loss spike near step 9 after
# which every implementation (compile against eager included) drifts apart
# chaotically: the loss agreement is judged step by step before it.
LOSS_STEPS_JUDGED = 8


def trellis_result(path, warmup, tokens_per_step):
    recs = [json.loads(line) for line in open(path) if line.startswith("{")]
    timed = [r["step_seconds"] for r in recs[warmup:]]
    return dict(
        implementation="trellis-train (LibTorch C++)", steps=len(recs),
        warmup_steps_untimed=warmup, tokens_per_step=tokens_per_step,
        tokens_per_s=tokens_per_step * len(timed) / sum(timed),
        step_seconds_median=statistics.median(timed),
        fwd_seconds_median=statistics.median(r["fwd_seconds"] for r in recs[warmup:]),
        bwd_seconds_median=statistics.median(r["bwd_seconds"] for r in recs[warmup:]),
        optim_seconds_median=statistics.median(r["optim_seconds"] for r in recs[warmup:]),
        exposed_comm_seconds_median=statistics.median(
            r.get("exposed_comm_seconds", 0) for r in recs[warmup:]),
        losses=[r["loss"] for r in recs],
        peak_mem_bytes=max(r.get("mem_allocated_peak_bytes", 0) for r in recs),
        reserved_bytes=max(r.get("mem_reserved_peak_bytes", 0) for r in recs),
        alloc_retries=recs[-1].get("alloc_retries", 0))


def main():
    work, prefix, command, warmup = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    info = json.load(open(os.path.join(work, "info.json")))
    peak = json.load(open(os.path.join(work, "peak.json")))
    tps_flops = info["training_flops_per_token"]
    runs = {}
    labels = {"trellis": "trellis-train, ATen Newton-Schulz (TRELLIS_KERNEL_NS=0)",
              "trellis_kernel_ns": "trellis-train, Newton-Schulz from kernels/ (default)"}
    # Fusion ablations: the default build with one fusion (or all) switched off.
    for path in sorted(glob.glob(os.path.join(work, "trellis_off_*.jsonl"))):
        name = os.path.basename(path)[:-len(".jsonl")]
        off = name[len("trellis_off_"):]
        labels[name] = f"trellis-train, default but TRELLIS_FUSIONS_OFF={off}"
    for name, label in labels.items():
        path = os.path.join(work, name + ".jsonl")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            runs[name] = trellis_result(path, warmup, info["tokens_per_step"])
            runs[name]["implementation"] = label
    for path in sorted(glob.glob(os.path.join(work, "pytorch_*.json"))):
        name = os.path.basename(path)[len("pytorch_"):-len(".json")]
        runs["pytorch_" + name] = json.load(open(path))
    eager = [r for n, r in runs.items() if n.startswith("pytorch_eager")]
    best_eager = max(eager, key=lambda r: r["tokens_per_s"]) if eager else None
    compiled = runs.get("pytorch_compile_grouped_mm")
    ns_per_token = info["newton_schulz_flops_per_step"] / info["tokens_per_step"]
    for r in runs.values():
        r["mfu"] = r["tokens_per_s"] * tps_flops / (peak["peak_tflops"] * 1e12)
        r["mfu_with_newton_schulz"] = (r["tokens_per_s"] * (tps_flops + ns_per_token)
                                       / (peak["peak_tflops"] * 1e12))
        if r.get("fwd_seconds_median") is not None:  # trellis: its own laps
            r["fwd_bwd_mfu"] = (info["tokens_per_step"] * tps_flops
                                / (r["fwd_seconds_median"] + r["bwd_seconds_median"])
                                / (peak["peak_tflops"] * 1e12))
        r["loss_mean"] = sum(r["losses"]) / len(r["losses"])
        r["loss_step_50"] = r["losses"][49] if len(r["losses"]) >= 50 else None
        r["loss_last"] = r["losses"][-1]
    ref = best_eager
    for r in runs.values():
        r["ratio_vs_pytorch"] = r["tokens_per_s"] / ref["tokens_per_s"] if ref else None
        r["ratio_vs_compile"] = r["tokens_per_s"] / compiled["tokens_per_s"] if compiled else None
        if ref:
            r["loss_rel_diff_vs_pytorch"] = abs(r["loss_last"] - ref["loss_last"]) / ref["loss_last"]
            # bf16 runs at moe-bench's learning rate drift apart step by step: the
            # agreement is judged on step 1 and on the mean over the run.
            r["loss_step1_rel_diff_vs_pytorch"] = (abs(r["losses"][0] - ref["losses"][0])
                                                   / ref["losses"][0])
            r["loss_mean_rel_diff_vs_pytorch"] = (abs(r["loss_mean"] - ref["loss_mean"])
                                                  / ref["loss_mean"])
            r["loss_first_steps_max_rel_diff_vs_pytorch"] = max(
                abs(a - b) / b for a, b in
                zip(r["losses"][:LOSS_STEPS_JUDGED], ref["losses"][:LOSS_STEPS_JUDGED]))
    # Targets on the faster trellis variant with every fusion (the JSON names it).
    mine = [n for n in ("trellis", "trellis_kernel_ns") if n in runs]
    best = max(mine, key=lambda n: runs[n]["tokens_per_s"]) if mine else None
    t = runs.get(best)
    targets = {"judged_run": best} if best else {}
    # What each fusion gains: the default run against the same with it off.
    base = runs.get("trellis_kernel_ns")
    fusions = {}
    for name, r in runs.items():
        if base and name.startswith("trellis_off_"):
            fusions[name[len("trellis_off_"):]] = dict(
                tokens_per_s_gain=base["tokens_per_s"] / r["tokens_per_s"],
                step_seconds_saved=r["step_seconds_median"] - base["step_seconds_median"],
                fwd_seconds_saved=r["fwd_seconds_median"] - base["fwd_seconds_median"],
                bwd_seconds_saved=r["bwd_seconds_median"] - base["bwd_seconds_median"],
                optim_seconds_saved=r["optim_seconds_median"] - base["optim_seconds_median"],
                peak_mem_bytes_saved=r["peak_mem_bytes"] - base["peak_mem_bytes"])
    # A target against a run that was not part of this bench is not judged
    # (None, "not judged" in the table) rather than missed.
    judged = lambda present, met: bool(met()) if present else None
    if t:
        targets |= {
            "tokens_per_s >= 1.2 x torch.compile": judged(
                compiled, lambda: t["ratio_vs_compile"] >= TARGET_RATIO_COMPILE),
            "forward + backward >= 0.5 of the bf16 matmul peak":
                t.get("fwd_bwd_mfu", 0) >= TARGET_FWD_BWD_MFU,
            "peak allocated <= torch.compile's": judged(
                compiled, lambda: t["peak_mem_bytes"] <= compiled["peak_mem_bytes"]),
            f"loss at each of the first {LOSS_STEPS_JUDGED} steps within 1% of pytorch eager": judged(
                ref, lambda: t["loss_first_steps_max_rel_diff_vs_pytorch"] <= TARGET_LOSS_REL),
            "alloc_retries == 0": t["alloc_retries"] == 0,
        }
    now = datetime.now(timezone.utc)
    out = dict(benchmark="trainer-gpu", date=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
               machine="one NVIDIA H200", device=peak["device"], torch=peak["torch"],
               command=command, config="examples/moe-bench.toml", model=info,
               peak_tflops=peak["peak_tflops"], reference="the fastest PyTorch eager run",
               runs=runs, targets=targets, fusion_gains=fusions)
    with open(prefix + ".json", "w") as f:
        json.dump(out, f, indent=1)

    gib = 2 ** 30
    groups = info.get("expert_groups", 1)  # model.expert_groups, where the spec sets it
    routing = f" with model.expert_groups = {groups}" if groups > 1 else ""
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)
    lines = [
        "# trainer-gpu: moe-bench on one GPU, trellis-train vs PyTorch",
        "",
        f"- Date: {out['date']}",
        f"- Machine: one NVIDIA H200 ({peak['device']}), torch {peak['torch']}",
        f"- Command: `{command}`",
        f"- Config: `examples/moe-bench.toml`{routing}: {info['params'] / 1e9:.2f} B parameters "
        f"({info['active_params_per_token'] / 1e9:.2f} B active per token), "
        f"{info['tokens_per_step']} tokens per step, "
        f"{tps_flops / 1e9:.2f} GFLOP per trained token (trainer_core/README.md, model/flops.h); "
        f"Muon's Newton-Schulz adds {info['newton_schulz_flops_per_step'] / 1e12:.1f} TFLOP per step",
        f"- Peak: bf16 matmul 8192^3 measured in this run: {peak['peak_tflops']:.0f} TFLOP/s; "
        "MFU = tokens/s x FLOP per token / peak",
        f"- Same initial weights and token batches on every row (trellis-export); the first "
        f"{warmup} steps are not timed; losses are each step's mean cross entropy",
        "",
        "| implementation | tokens/s | vs best eager | vs compile | MFU | MFU incl. NS | "
        "step s (median) | peak alloc GiB | reserved GiB | alloc retries | loss step 1 | loss step 50 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        lines.append(
            f"| {r['implementation']} | {r['tokens_per_s']:.0f} | {fmt(r['ratio_vs_pytorch'], '.2f')} | "
            f"{fmt(r['ratio_vs_compile'], '.2f')} | {r['mfu']:.3f} | {r['mfu_with_newton_schulz']:.3f} | "
            f"{r['step_seconds_median']:.3f} | {r['peak_mem_bytes'] / gib:.1f} | "
            f"{r['reserved_bytes'] / gib:.1f} | {r['alloc_retries']} | {r['losses'][0]:.4f} | "
            f"{fmt(r['loss_step_50'], '.4f')} |")
    rows = info["global_batch"]
    lines += ["", f"Step parts of the trellis runs, ms per row ({rows} rows per step, medians):", "",
              "| run | forward | backward | optimizer | exposed comm | step |",
              "|---|---|---|---|---|---|"]
    for name, r in runs.items():
        if name.startswith("trellis"):
            ms = lambda key: f"{r[key] * 1e3 / rows:.1f}"
            lines.append(f"| {name} | {ms('fwd_seconds_median')} | {ms('bwd_seconds_median')} | "
                         f"{ms('optim_seconds_median')} | {ms('exposed_comm_seconds_median')} | "
                         f"{ms('step_seconds_median')} |")
    if fusions:
        lines += ["", "What each fusion gains (the default run against the same run with that "
                  "fusion off; positive = saved by the fusion):", "",
                  "| fusion off | tokens/s gain | step ms | forward ms | backward ms | "
                  "optimizer ms | peak alloc GiB |", "|---|---|---|---|---|---|---|"]
        for f, g in fusions.items():
            lines.append(f"| {f} | {g['tokens_per_s_gain']:.3f}x | {g['step_seconds_saved'] * 1e3:.1f} | "
                         f"{g['fwd_seconds_saved'] * 1e3:.1f} | {g['bwd_seconds_saved'] * 1e3:.1f} | "
                         f"{g['optim_seconds_saved'] * 1e3:.1f} | "
                         f"{g['peak_mem_bytes_saved'] / gib:.2f} |")
    if t:
        lines += ["", f"trellis step breakdown (median s): forward {t['fwd_seconds_median']:.3f}, "
                  f"backward {t['bwd_seconds_median']:.3f}, optimizer {t['optim_seconds_median']:.3f}; "
                  f"forward + backward at {t['fwd_bwd_mfu']:.3f} of the bf16 matmul peak",
                  "", "| target | met |", "|---|---|"]
        verdict = lambda v: "not judged (its reference run is not in RUNS)" if v is None else (
            "yes" if v else "MISSED")
        lines += [f"| {k} ({labels[best]}) | {verdict(v)} |"
                  for k, v in targets.items() if k != "judged_run"]
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
