#!/usr/bin/env python3
"""Table and JSON for bench/gpu/multi_gpu.sh: one row per variant from the
ranks' JSON step records (WORK/<variant>.rank<r>.jsonl) and NCCL's INFO lines
(WORK/<variant>.rank<r>.nccl)."""
import glob, json, os, re, statistics, sys, tomllib
from datetime import datetime, timezone

work, prefix, command, ngpu, warmup, variants = sys.argv[1:7]
machine = sys.argv[7] if len(sys.argv) > 7 else "not recorded"
ngpu, warmup, variants = int(ngpu), int(warmup), variants.split()


def ranks(variant):
    files = sorted(glob.glob(os.path.join(work, f"{variant}.rank*.jsonl")),
                   key=lambda p: int(re.search(r"rank(\d+)", p).group(1)))
    out = []
    for f in files:  # only the step records: anything else on stdout is not ours
        recs = []
        for line in open(f, errors="replace"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and "step" in rec:
                recs.append(rec)
        out.append(recs)
    return out


def nccl_ctas(variant):
    """The most CTAs (channels) any communicator of the run uses per collective."""
    most = None
    for f in glob.glob(os.path.join(work, f"{variant}.rank*.nccl*")):
        for m in re.finditer(r"(\d+) coll channels", open(f, errors="replace").read()):
            most = max(most or 0, int(m.group(1)))
    return most


def spec(variant):
    return tomllib.load(open(os.path.join(work, f"{variant}.toml"), "rb"))


rows = {}
for v in variants:
    recs = ranks(v)
    if not recs or not all(recs) or len({len(r) for r in recs}) != 1:
        rows[v] = {"error": "missing or incomplete step records"}
        continue
    world, steps = len(recs), len(recs[0])
    want = spec(v)["training"]["steps"]
    if steps < want:  # every rank stopped early: the variant failed
        rows[v] = {"error": f"stopped after step {steps} of {want} (see {v}.rank*.err)"}
        continue
    timed = range(min(warmup, steps - 1), steps)
    step_s = [max(r[i]["step_seconds"] for r in recs) for i in timed]
    tokens = sum(r[0]["tokens"] for r in recs)
    med = statistics.median(step_s)
    part = lambda k: statistics.median(recs[0][i].get(k, 0) for i in timed)
    rows[v] = {
        "world": world,
        "node_size": spec(v)["parallel"]["node_size"],
        "steps": steps,
        "tokens_per_step": tokens,
        "step_seconds_median": med,
        "fwd_seconds_median": part("fwd_seconds"),
        "bwd_seconds_median": part("bwd_seconds"),
        "optim_seconds_median": part("optim_seconds"),
        # The step's collective time and the part the compute stood waiting
        # (rank 0; absent at world 1).
        "comm_seconds_median": part("comm_seconds"),
        "exposed_comm_seconds_median": part("exposed_comm_seconds"),
        "exposed_comm_share_of_step": part("exposed_comm_seconds") / med,
        "tokens_per_s": tokens / med,
        "tokens_per_s_per_gpu": tokens / med / world,
        "alloc_retries_per_rank": [r[-1].get("alloc_retries", 0) for r in recs],
        "allocated_peak_bytes_per_rank": [max(x.get("mem_allocated_peak_bytes", 0) for x in r)
                                          for r in recs],
        "reserved_peak_bytes_per_rank": [max(x.get("mem_reserved_peak_bytes", 0) for x in r)
                                         for r in recs],
        "nccl_ctas_per_collective": nccl_ctas(v),
        # The busiest EP rank's token-expert pairs over the mean (the step's,
        # worst layer; EP > 1 only): the MoE layers wait for that rank.
        "ep_load_median": (statistics.median(recs[0][i]["ep_load_max_over_mean"] for i in timed)
                           if all("ep_load_max_over_mean" in recs[0][i] for i in timed) else None),
        "losses": [x["loss"] for x in recs[0]],
    }

# Bytes each rank receives per layer for its expert block (the other node's
# half) and sends back as gradients: counted from the spec, not measured.
base = spec("base") if "base" in variants else None
if base:
    m, p = base["model"], base["parallel"]
    ep = p.get("ep", ngpu // 2)
    block = m["experts"] // ep * 3 * m["expert_hidden"] * m["hidden"]
    replicas = ngpu // ep
    moved = block * (replicas - 1) / replicas
    per_value = {"float32": 4, "bfloat16": 2, "fp8": 1 + 4 / 128}
    bytes_gather = {k: moved * b for k, b in per_value.items()}
    bytes_grad = {"bfloat16": moved * 2, "float32": moved * 4}
else:
    bytes_gather = bytes_grad = {}

one = rows.get("one_gpu", {}).get("tokens_per_s")
for v, r in rows.items():
    if "tokens_per_s_per_gpu" in r and one:
        r["scaling_per_gpu_vs_1"] = r["tokens_per_s_per_gpu"] / one


def loss_gap(a, b, n=10):
    la, lb = rows.get(a, {}).get("losses"), rows.get(b, {}).get("losses")
    if not la or not lb:
        return None
    return max(abs(x - y) for x, y in zip(la[:n], lb[:n]))


def final_loss_gap(a, b):
    la, lb = rows.get(a, {}).get("losses"), rows.get(b, {}).get("losses")
    return abs(la[-1] - lb[-1]) if la and lb and len(la) == len(lb) else None


def ratio(a, b, key="tokens_per_s"):
    x, y = rows.get(a, {}).get(key), rows.get(b, {}).get(key)
    return x / y if x and y else None


comparisons = {
    "fp8_vs_fp32_gather_max_loss_diff_10_steps": loss_gap("gather_fp8", "base"),
    "bf16_vs_fp32_gather_max_loss_diff_10_steps": loss_gap("gather_bf16", "base"),
    "bf16_a2a_vs_fp32_grads_max_loss_diff_10_steps": loss_gap("base", "grad_fp32"),
    "bf16_a2a_vs_fp32_grads_final_loss_diff": final_loss_gap("base", "grad_fp32"),
    "fp8_vs_fp32_gather_final_loss_diff": final_loss_gap("gather_fp8", "base"),
    # visible_one computes exactly what base does: their gap is the run-to-run
    # noise (non-deterministic GPU reductions) that the gaps above sit in.
    "same_numerics_max_loss_diff_10_steps": loss_gap("visible_one", "base"),
    "same_numerics_final_loss_diff": final_loss_gap("visible_one", "base"),
    # The overlap's aim: base (prefetch on) at >= 0.95 of one GPU's tokens/s
    # per GPU with exposed communication under 5% of the step; prefetch_off
    # is the same run waiting for every collective at once (same numbers).
    "base_tokens_per_s_per_gpu_vs_1": rows.get("base", {}).get("scaling_per_gpu_vs_1"),
    "base_exposed_comm_share_of_step": rows.get("base", {}).get("exposed_comm_share_of_step"),
    "prefetch_off_exposed_comm_share_of_step":
        rows.get("prefetch_off", {}).get("exposed_comm_share_of_step"),
    "base_vs_prefetch_off_tokens_per_s": ratio("base", "prefetch_off"),
    # What routing imbalance costs the expert-parallel mesh: one_node against
    # itself with every EP rank given the same load (expert_groups = EP).
    "one_node_vs_groups_tokens_per_s": ratio("one_node", "one_node_groups"),
    "prefetch_off_vs_base_max_loss_diff_10_steps": loss_gap("prefetch_off", "base"),
    "expert_gather_bytes_per_layer_per_rank": bytes_gather,
    "grad_reduce_bytes_per_layer_per_rank": bytes_grad,
}
doc = {
    "benchmark": "multi-gpu",
    "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "command": command,
    "machine": machine,
    "gpus": ngpu,
    "node_size": ngpu // 2,
    "runs": rows,
    "comparisons": comparisons,
}
json.dump(doc, open(prefix + ".json", "w"), indent=1)

fmt = lambda x, f="{:.3g}": "n/a" if x is None else f.format(x)
name = base["job"]["name"] if base else "the spec"
# SHARE_ONE_GPU=1 (multi_gpu.sh): the script's GPU path, not the GPUs' speed.
shared = "sharing 1 x" in machine
where = "sharing one GPU" if shared else "one per GPU"
lines = [f"# multi-gpu: {name} on {ngpu} ranks ({where})", "",
         f"- Date: {doc['date']}", f"- Machine: {machine}", f"- Command: `{command}`", ""]
if shared:
    lines += ["- The ranks take turns on one GPU, each a NCCL host of its own, and their "
              "collectives go through host memory over NCCL's socket transport: the figures "
              "check the script and the trainer's NCCL path, they say nothing of "
              f"{ngpu} GPUs.", ""]
lines += [
         "| variant | ranks | nodes x GPUs | tokens/s | tokens/s/GPU | vs 1 GPU | step s | fwd |"
         " bwd | optim | comm | exposed | exposed % step | NCCL CTAs | EP load | alloc retries |"
         " allocated GiB (max rank) | reserved GiB (max rank) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for v, r in rows.items():
    if "error" in r:
        lines.append(f"| {v} | {r['error']} |" + " |" * 16)
        continue
    lines.append(
        f"| {v} | {r['world']} | {r['world'] // r['node_size']} x {r['node_size']} | "
        f"{r['tokens_per_s']:.0f} | {r['tokens_per_s_per_gpu']:.0f} | "
        f"{fmt(r.get('scaling_per_gpu_vs_1'), '{:.2f}')} | {r['step_seconds_median']:.3f} | "
        f"{r['fwd_seconds_median']:.3f} | {r['bwd_seconds_median']:.3f} | "
        f"{r['optim_seconds_median']:.3f} | {r['comm_seconds_median']:.3f} | "
        f"{r['exposed_comm_seconds_median']:.3f} | "
        f"{100 * r['exposed_comm_share_of_step']:.1f} | "
        f"{fmt(r['nccl_ctas_per_collective'], '{}')} | "
        f"{fmt(r['ep_load_median'], '{:.3f}')} | "
        f"{max(r['alloc_retries_per_rank'])} | "
        f"{max(r['allocated_peak_bytes_per_rank']) / 2**30:.1f} | "
        f"{max(r['reserved_peak_bytes_per_rank']) / 2**30:.1f} |")
lines += ["", "| comparison | value |", "|---|---|"]
for k, v in comparisons.items():
    if isinstance(v, dict):
        v = ", ".join(f"{n} {b / 2**20:.3g} MiB" for n, b in v.items()) or "n/a"
    else:
        v = fmt(v)
    lines.append(f"| {k} | {v} |")
open(prefix + ".md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
