#!/usr/bin/env python3
"""The trellis MoE model and optimizer in plain PyTorch: the reference that
bench/gpu/run.sh times trellis-train against.

Same architecture, numerics and optimizer as trainer_core (README "Model"):
fp32 master weights cast to bf16 for compute (FSDP's param_dtype=bf16 mixed
precision: the residual stream is bf16 too), RMSNorm (fused F.rms_norm),
grouped-query attention with RoPE through SDPA with is_causal (flash/cuDNN),
softmax top-k routing with renormalized gates and the Switch balance loss,
SwiGLU experts from stacked [E, out, in] weights, and Muon (Nesterov 0.95,
quintic Newton-Schulz x 5 in bf16, sqrt(max(1, rows/cols)) scale, decoupled
weight decay) for attention and expert matrices, fused AdamW for embedding,
head, router and norms; global-norm clipping; linear warmup then cosine.

Experts run either through torch._grouped_mm (one grouped GEMM per
projection over all experts, as torchtitan does) or through the usual
per-expert loop (split the sorted tokens by expert, one SwiGLU each).
The weights and token batches are the files trellis-export writes, so both
implementations start from the same weights and see the same tokens.

Gradient accumulation as trellis-train does it (training.micro_batch, or
--micro-batch): the step's rows run in forwards of micro_batch rows, the
gradients add up in the parameters' .grad, then one clip and optimizer step.
Each micro-batch's cross entropy is summed and divided by the whole batch's
target count (the micro-batches' losses and gradients add up to the unsplit
batch's); the balance loss is each micro-batch's own, weighted by its share
of the rows.

  pytorch_moe.py train --spec S.toml --weights W.safetensors --batches B.safetensors
                 [--experts grouped_mm|loop] [--compile] [--steps N] [--micro-batch M]
                 --out RESULT.json
  pytorch_moe.py peak --out PEAK.json      # bf16 matmul TFLOP/s on this GPU
"""
import argparse
import json
import math
import statistics
import sys
import time
import tomllib

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

NS_COEFFS = (3.4445, -4.7750, 2.0315)


def model_spec(path):
    with open(path, "rb") as f:
        root = tomllib.load(f)
    m = dict(layers=2, hidden=64, heads=4, kv_heads=2, experts=4, experts_per_token=2,
             expert_hidden=128, vocab=256, shared_expert=False, rope_theta=10000.0, norm_eps=1e-5,
             expert_groups=1)
    m.update(root.get("model", {}))
    t = dict(seq_len=128, global_batch=8, steps=100, lr=3e-3, warmup_steps=10, min_lr_ratio=0.1,
             weight_decay=0.1, grad_clip=1.0, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8,
             muon_lr=0.02, muon_momentum=0.95, muon_ns_steps=5, aux_loss_coef=0.01,
             router_bias_rate=0.0, micro_batch=0)
    t.update(root.get("training", {}))
    if m["shared_expert"] or t["router_bias_rate"] != 0:
        sys.exit("pytorch_moe.py: shared_expert and router_bias_rate are not implemented here")
    return m, t


def lr_scale(step, warmup, total, min_ratio):  # optim/schedule.h, 0-based step
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def rope_tables(seq_len, head_dim, theta, device):
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float().to(device), angles.sin().float().to(device)


def apply_rope(x, cos, sin):  # x [B, heads, T, hd]: rotate the two halves
    half = x.shape[-1] // 2
    cos, sin = cos[: x.shape[2]], sin[: x.shape[2]]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def experts_grouped_mm(xs, counts, w_gate, w_up, w_down):
    offs = counts.cumsum(0).to(torch.int32)
    h = F.silu(torch._grouped_mm(xs, w_gate.transpose(-2, -1), offs=offs))
    h = h * torch._grouped_mm(xs, w_up.transpose(-2, -1), offs=offs)
    return torch._grouped_mm(h, w_down.transpose(-2, -1), offs=offs)


def experts_loop(xs, counts, w_gate, w_up, w_down):
    outs = []
    for e, part in enumerate(torch.split(xs, counts.tolist())):
        if part.shape[0]:
            outs.append((F.silu(part @ w_gate[e].t()) * (part @ w_up[e].t())) @ w_down[e].t())
    return torch.cat(outs)


LAYER_PARAMS = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "router", "w_gate", "w_up",
                "w_down")


def layer(m, run_experts, x, cos, sin, attn_norm, wq, wk, wv, wo, ffn_norm, router, w_gate, w_up,
          w_down):
    """x += Attn(RMSNorm(x)); x += MoE(RMSNorm(x)). Weights come in as
    arguments (fp32 masters, cast here), so one compiled graph serves every
    layer."""
    bf = torch.bfloat16
    b, t, h = x.shape
    heads, kv, eps = m["heads"], m["kv_heads"], m["norm_eps"]
    hd = h // heads
    a = F.rms_norm(x, (h,), attn_norm.to(bf), eps)
    q = apply_rope((a @ wq.to(bf).t()).view(b, t, heads, hd).transpose(1, 2), cos, sin)
    k = apply_rope((a @ wk.to(bf).t()).view(b, t, kv, hd).transpose(1, 2), cos, sin)
    v = (a @ wv.to(bf).t()).view(b, t, kv, hd).transpose(1, 2)
    k, v = k.repeat_interleave(heads // kv, 1), v.repeat_interleave(heads // kv, 1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + o.transpose(1, 2).reshape(b, t, h) @ wo.to(bf).t()

    n, e, top = b * t, m["experts"], m["experts_per_token"]
    f = F.rms_norm(x, (h,), ffn_norm.to(bf), eps).view(n, h)
    probs = torch.softmax((f @ router.to(bf).t()).float(), -1)
    chosen = choose_experts(probs.detach(), top, m["expert_groups"])
    gates = probs.gather(1, chosen)
    gates = gates / gates.sum(-1, keepdim=True)
    flat = chosen.reshape(-1)
    counts = torch.zeros(e, dtype=torch.long, device=x.device).scatter_add_(
        0, flat, torch.ones_like(flat))
    aux = e * (counts.float() / (n * top) * (probs.sum(0) / n)).sum()
    order = torch.argsort(flat, stable=True)  # slots grouped by expert
    out = run_experts(f[order // top], counts, w_gate.to(bf), w_up.to(bf), w_down.to(bf))
    by_slot = torch.empty_like(out).index_copy_(0, order, out).view(n, top, h)
    y = (by_slot * gates.to(bf).unsqueeze(-1)).sum(1)
    return x + y.view(b, t, h), aux


def choose_experts(scores, top, groups):
    """Plain top-k (groups 1), or top // groups of every group of consecutive
    experts (group-limited routing, model.expert_groups)."""
    if groups == 1:
        return scores.topk(top, -1).indices
    n, e = scores.shape
    local = scores.view(n, groups, e // groups).topk(top // groups, -1).indices
    first = torch.arange(groups, device=scores.device).view(1, groups, 1) * (e // groups)
    return (local + first).view(n, top)


def head_loss(x, norm, head, targets, eps):
    """The summed cross entropy: the caller divides by the step's target
    count, which micro-batches share."""
    bf = torch.bfloat16
    logits = F.rms_norm(x, (x.shape[-1],), norm.to(bf), eps) @ head.to(bf).t()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1),
                           ignore_index=-1, reduction="sum")


class MoeModel:
    """Parameters: a dict of fp32 leaves named like trellis' layout."""

    def __init__(self, m, seq_len, params, experts_impl, compiled):
        self.m, self.p = m, params
        self.run_experts = experts_grouped_mm if experts_impl == "grouped_mm" else experts_loop
        hd = m["hidden"] // m["heads"]
        cos, sin = rope_tables(seq_len, hd, m["rope_theta"], params["embed.weight"].device)
        self.cos, self.sin = cos.to(torch.bfloat16), sin.to(torch.bfloat16)
        # Compiled: one graph for the layer (the same shapes every layer) and
        # one for the head and loss; the loop over layers stays in Python.
        self.layer = torch.compile(layer) if compiled else layer
        self.head_loss = torch.compile(head_loss) if compiled else head_loss

    def forward(self, inputs, targets, aux_coef, step_targets):
        """This micro-batch's share of the step's mean cross entropy (over
        `step_targets`), and the loss to run backward on."""
        m, p = self.m, self.p
        x = F.embedding(inputs, p["embed.weight"].to(torch.bfloat16))
        auxes = []
        for i in range(m["layers"]):
            ws = [p[f"layers.{i}.{name}"] for name in LAYER_PARAMS]
            x, aux = self.layer(m, self.run_experts, x, self.cos, self.sin, *ws)
            auxes.append(aux)
        ce = self.head_loss(x, p["final.norm"], p["final.head"], targets, m["norm_eps"])
        ce = ce / max(1, step_targets)
        return ce, ce + aux_coef * torch.stack(auxes).mean()


def newton_schulz(g, steps):
    a, b, c = NS_COEFFS
    x = g.bfloat16()
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.mT if tall else x


class Muon(torch.optim.Optimizer):
    """trainer_core's Muon: m = beta m + g; update = g + beta m (Nesterov);
    p = p (1 - lr wd) - lr sqrt(max(1, rows/cols)) NS(update). Stacked
    experts [E, out, in] are E matrices, orthogonalized in one batch."""

    def __init__(self, params, lr, momentum, ns_steps, weight_decay):
        super().__init__(params, dict(lr=lr, momentum=momentum, ns_steps=ns_steps,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta, lr = group["momentum"], group["lr"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["momentum"] = torch.zeros_like(p)
                mom = state["momentum"]
                mom.mul_(beta).add_(p.grad)
                ortho = newton_schulz(p.grad.add(mom, alpha=beta), group["ns_steps"])
                scale = math.sqrt(max(1.0, p.size(-2) / p.size(-1)))
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(ortho, alpha=-lr * scale)


def make_optimizers(params, t):
    muon_names = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
    muon, decay, no_decay = [], [], []
    for name, p in params.items():
        short = name.split(".")[-1]
        if short in muon_names:
            muon.append(p)
        elif short.endswith("norm"):
            no_decay.append(p)
        else:  # embed.weight, final.head, layers.i.router
            decay.append(p)
    m = Muon(muon, t["muon_lr"], t["muon_momentum"], t["muon_ns_steps"], t["weight_decay"])
    a = torch.optim.AdamW([dict(params=decay, weight_decay=t["weight_decay"]),
                           dict(params=no_decay, weight_decay=0.0)],
                          lr=t["lr"], betas=(t["adam_beta1"], t["adam_beta2"]),
                          eps=t["adam_eps"], fused=True)
    return m, a


def clip_grad_norm(params, max_norm):  # trainer_core: fp64 total, scale by max / (norm + 1e-6)
    grads = [p.grad for p in params]
    norm = torch.stack([torch.linalg.vector_norm(g).double() for g in grads]).norm()
    if max_norm > 0:
        coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0).float()
        torch._foreach_mul_(grads, coef)
    return norm


def write_profile(profiler, path, steps):
    """The CUDA kernels of `steps` steps, by time and kind (kernel_table.py)."""
    from kernel_table import write_table  # beside this script
    rows = []
    for e in profiler.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0)
        # Only CUDA activity is recorded: every event with device time is a kernel.
        if t > 0:
            rows.append((t / 1e3, e.count, e.key))
    write_table(rows, steps, path)


def train(args):
    torch.manual_seed(0)
    m, t = model_spec(args.spec)
    dev = torch.device("cuda")
    params = {k: v.requires_grad_(True) for k, v in load_file(args.weights, device="cuda").items()}
    batches = load_file(args.batches)
    inputs, targets = batches["inputs"].long(), batches["targets"].long()
    steps = min(args.steps, inputs.shape[0])
    rows = inputs.shape[1]
    micro = args.micro_batch if args.micro_batch is not None else t["micro_batch"]
    micro = micro or rows
    if micro < 1 or rows % micro:
        sys.exit(f"pytorch_moe.py: micro_batch = {micro} does not divide the {rows} rows of "
                 f"a step; accepted: a divisor of {rows}, or 0 (all in one forward)")
    parts = rows // micro
    model = MoeModel(m, inputs.shape[-1], params, args.experts, args.compile)
    muon, adamw = make_optimizers(params, t)
    plist = list(params.values())
    tokens = inputs.shape[1] * inputs.shape[2]
    losses, seconds = [], []
    torch.cuda.reset_peak_memory_stats()
    profiler = None
    for step in range(steps):
        if args.profile and step == args.warmup:  # two timed steps, after the warm-up
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            profiler.__enter__()
        if profiler and step == args.warmup + 2:
            profiler.__exit__(None, None, None)
            write_profile(profiler, args.profile, 2)
            profiler = None
        torch.cuda.synchronize()
        start = time.perf_counter()
        x, y = inputs[step].to(dev, non_blocking=True), targets[step].to(dev, non_blocking=True)
        step_targets = int((targets[step] != -1).sum())  # on the host: no sync
        for p in plist:
            p.grad = None
        ce = 0
        for i in range(parts):  # backward adds into .grad
            rows_i = slice(i * micro, (i + 1) * micro)
            ce_i, loss = model.forward(x[rows_i], y[rows_i], t["aux_loss_coef"] / parts,
                                       step_targets)
            loss.backward()
            ce = ce + ce_i.detach()
        clip_grad_norm(plist, t["grad_clip"])
        scale = lr_scale(step, t["warmup_steps"], t["steps"], t["min_lr_ratio"])
        for g in muon.param_groups:
            g["lr"] = t["muon_lr"] * scale
        for g in adamw.param_groups:
            g["lr"] = t["lr"] * scale
        muon.step()
        adamw.step()
        losses.append(ce.item())  # syncs: the step's work is done
        seconds.append(time.perf_counter() - start)
        print(f"step {step + 1} loss {losses[-1]:.4f} {seconds[-1]:.3f}s", flush=True)
    stats = torch.cuda.memory_stats()
    timed = seconds[args.warmup:]
    result = dict(
        implementation="pytorch " + ("compile" if args.compile else "eager") + " " + args.experts,
        torch=torch.__version__, steps=steps, warmup_steps_untimed=args.warmup,
        global_batch=rows, micro_batch=micro,
        tokens_per_step=tokens, tokens_per_s=tokens * len(timed) / sum(timed),
        step_seconds_median=statistics.median(timed), losses=losses,
        peak_mem_bytes=torch.cuda.max_memory_allocated(),
        reserved_bytes=torch.cuda.max_memory_reserved(),
        alloc_retries=stats.get("num_alloc_retries", 0))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


def peak(args):
    """bf16 matmul rate on random data (8192^3, several operand sets so the
    cache cannot help), median of timed repeats with CUDA events."""
    n, sets = 8192, 4
    a = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    b = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    for i in range(10):
        a[i % sets] @ b[i % sets]
    times = []
    for i in range(40):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a[i % sets] @ b[i % sets]
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    tflops = 2 * n ** 3 / statistics.median(times) / 1e12
    with open(args.out, "w") as f:
        json.dump(dict(peak_tflops=tflops, device=torch.cuda.get_device_name(0),
                       torch=torch.__version__), f)
    print(f"bf16 matmul {n}^3: {tflops:.0f} TFLOP/s")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("train")
    tr.add_argument("--spec", required=True)
    tr.add_argument("--weights", required=True)
    tr.add_argument("--batches", required=True)
    tr.add_argument("--experts", choices=["grouped_mm", "loop"], default="grouped_mm")
    tr.add_argument("--compile", action="store_true")
    tr.add_argument("--steps", type=int, default=50)
    tr.add_argument("--warmup", type=int, default=5, help="first steps left out of the timing")
    tr.add_argument("--micro-batch", type=int, default=None,
                    help="rows per forward (gradient accumulation); default training.micro_batch "
                         "of the spec, 0 or absent: the whole batch")
    tr.add_argument("--profile", default=None,
                    help="write the CUDA kernels of two steps after the warm-up here, by time "
                         "and kind (the profiled steps are timed as well; compare runs, not "
                         "their tokens/s)")
    tr.add_argument("--out", required=True)
    pk = sub.add_parser("peak")
    pk.add_argument("--out", required=True)
    args = ap.parse_args()
    train(args) if args.cmd == "train" else peak(args)


if __name__ == "__main__":
    main()
