"""What a fused gate+up expert GEMM and grouped-head masked attention would
gain on this GPU, measured before either is built into trainer_core.

moe-bench's shapes per micro-batch of 2 rows (16,384 tokens, top-8 of 64
experts): the routed rows' grouped GEMMs, forward and backward, with gate and
up as two GEMMs (as trainer_core runs them) and as one of twice the width; and
scaled_dot_product_attention with a boolean mask, grouped heads passed as
enable_gqa or repeated. Prints one JSON line per case.
Usage: python3 bench/gpu/probes/expert_ffn.py [--iters 20] [--attention-only]
"""
import argparse
import json

import torch
import torch.nn.functional as F

from gpu_timing import timed

H, FF, E, TOPK, TOKENS = 2048, 768, 64, 8, 16384
HEADS, KV_HEADS, SEQ, ROWS = 16, 4, 8192, 2


def gmm(a, b, offs):
    return torch._grouped_mm(a, b, offs=offs)


def expert_cases(iters):
    dev, bf = "cuda", torch.bfloat16
    m = TOKENS * TOPK
    # Routing as a softmax router spreads it: counts drawn, not uniform.
    counts = torch.distributions.Multinomial(m, torch.ones(E)).sample().to(torch.int64)
    offs = counts.cumsum(0).to(torch.int32).to(dev)
    x = torch.randn(m, H, device=dev, dtype=bf)
    wg, wu = (torch.randn(E, FF, H, device=dev, dtype=bf) * 0.02 for _ in range(2))
    wd = torch.randn(E, H, FF, device=dev, dtype=bf) * 0.02
    w13 = torch.cat([wg, wu], 1)
    dy = torch.randn(m, H, device=dev, dtype=bf)
    dg, du = torch.randn(m, FF, device=dev, dtype=bf), torch.randn(m, FF, device=dev, dtype=bf)
    dgu = torch.cat([dg, du], 1)
    h = torch.randn(m, FF, device=dev, dtype=bf)
    t = lambda w: w.transpose(-2, -1)

    def two_fwd():
        return gmm(x, t(wg), offs), gmm(x, t(wu), offs)

    def one_fwd():
        return gmm(x, t(w13), offs)

    def two_bwd():  # dgrad of x (two GEMMs and their sum), wgrad of gate and up
        dx = gmm(dg, wg, offs) + gmm(du, wu, offs)
        return dx, gmm(t(dg), x, offs), gmm(t(du), x, offs)

    def one_bwd():
        return gmm(dgu, w13, offs), gmm(t(dgu), x, offs)

    def down():  # the down projection, forward and both gradients: unchanged by the fusion
        return gmm(h, t(wd), offs), gmm(dy, wd, offs), gmm(t(dy), h, offs)

    flop_up = 2 * m * H * 2 * FF * 3  # gate and up: forward, dgrad, wgrad
    out = {}
    for name, fn in [("gate_up_two_fwd", two_fwd), ("gate_up_one_fwd", one_fwd),
                     ("gate_up_two_bwd", two_bwd), ("gate_up_one_bwd", one_bwd),
                     ("down_fwd_bwd", down)]:
        out[name] = timed(fn, iters)
    for k in ("two", "one"):
        ms = out[f"gate_up_{k}_fwd"] + out[f"gate_up_{k}_bwd"]
        out[f"gate_up_{k}_tflops"] = flop_up / ms / 1e9
    return out


def attention_cases(iters):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dev, bf = "cuda", torch.bfloat16
    q = torch.randn(ROWS, HEADS, SEQ, 128, device=dev, dtype=bf, requires_grad=True)
    k = torch.randn(ROWS, KV_HEADS, SEQ, 128, device=dev, dtype=bf, requires_grad=True)
    v = torch.randn(ROWS, KV_HEADS, SEQ, 128, device=dev, dtype=bf, requires_grad=True)
    # Two documents per row: a block-diagonal causal mask.
    pos = torch.arange(SEQ, device=dev)
    doc = (pos >= SEQ // 3).to(torch.int32)
    mask = (pos[None, :] <= pos[:, None]) & (doc[None, :] == doc[:, None])
    mask = mask[None, None]
    g = HEADS // KV_HEADS
    every = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
             SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]
    out = {}

    def run(gqa, backends):
        def fn():
            with sdpa_kernel(backends):
                if gqa:
                    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
                else:
                    o = F.scaled_dot_product_attention(
                        q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=mask)
            o.backward(torch.ones_like(o))
        return fn

    for name, gqa, backends in [
            ("masked_repeat_default", False, every),
            ("masked_gqa_default", True, every),
            ("masked_gqa_efficient_only", True, [SDPBackend.EFFICIENT_ATTENTION]),
            ("masked_repeat_efficient_only", False, [SDPBackend.EFFICIENT_ATTENTION])]:
        torch.cuda.reset_peak_memory_stats()
        try:
            out[name + "_ms"] = timed(run(gqa, backends), iters)
            out[name + "_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        except RuntimeError as e:
            out[name + "_error"] = str(e).splitlines()[0][:200]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--attention-only", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}))
    if not a.attention_only:
        print(json.dumps({"expert_ffn_ms": expert_cases(a.iters)}))
    print(json.dumps({"attention_ms": attention_cases(a.iters)}))


if __name__ == "__main__":
    main()
