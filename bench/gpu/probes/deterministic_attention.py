"""What `training.deterministic` costs in attention, per backend of
scaled_dot_product_attention, measured before anything is changed.

moe-bench's causal attention per micro-batch of 2 rows (16 query heads, 4
key/value heads, 8,192 positions, head dim 128, bf16): forward and backward
with deterministic algorithms off and on, for each backend that PyTorch lets
run, with grouped heads passed as enable_gqa or repeated. Each case also says
whether three backward passes over the same inputs gave the same bits.
Prints one JSON line per case.
Usage: python3 bench/gpu/probes/deterministic_attention.py [--iters 10]
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu_timing import timed

HEADS, KV_HEADS, SEQ, ROWS, DIM = 16, 4, 8192, 2, 128
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def attention(q, k, v, gqa):
    if gqa:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    g = HEADS // KV_HEADS
    return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1),
                                          v.repeat_interleave(g, 1), is_causal=True)


def case(backend, deterministic, gqa, iters):
    torch.use_deterministic_algorithms(deterministic)
    dev, bf = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(0)
    q = torch.randn(ROWS, HEADS, SEQ, DIM, device=dev, dtype=bf, generator=gen, requires_grad=True)
    k = torch.randn(ROWS, KV_HEADS, SEQ, DIM, device=dev, dtype=bf, generator=gen,
                    requires_grad=True)
    v = torch.randn(ROWS, KV_HEADS, SEQ, DIM, device=dev, dtype=bf, generator=gen,
                    requires_grad=True)
    dout = torch.randn(ROWS, HEADS, SEQ, DIM, device=dev, dtype=bf, generator=gen)
    out = {"backend": backend, "deterministic": deterministic, "gqa": gqa}

    def forward():
        with sdpa_kernel([BACKENDS[backend]]), torch.no_grad():
            attention(q, k, v, gqa)

    def forward_backward():
        with sdpa_kernel([BACKENDS[backend]]):
            o = attention(q, k, v, gqa)
        return torch.autograd.grad(o, (q, k, v), dout)

    torch.cuda.reset_peak_memory_stats()
    try:
        grads = [forward_backward() for _ in range(3)]
        out["same_bits"] = all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))
        out["fwd_ms"] = timed(forward, iters)
        out["fwd_bwd_ms"] = timed(forward_backward, iters)
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    except RuntimeError as e:
        out["error"] = str(e).splitlines()[0][:200]
    finally:
        torch.use_deterministic_algorithms(False)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                      "cudnn": torch.backends.cudnn.version()}))
    # Causal attention's FLOPs, forward (two products, half the square) and
    # backward (five, 2.5x).
    fwd_flop = 2 * 2 * ROWS * HEADS * SEQ * SEQ * DIM // 2
    for backend in BACKENDS:
        for deterministic in (False, True):
            for gqa in (True, False):
                r = case(backend, deterministic, gqa, a.iters)
                if "fwd_bwd_ms" in r:
                    r["fwd_bwd_tflops"] = 3.5 * fwd_flop / r["fwd_bwd_ms"] / 1e9
                print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
