"""What the routed experts' weight gradients cost when they are accumulated
over micro-batches, measured before a fusion is built into trainer_core.

moe-bench's shapes per micro-batch of 2 rows (16,384 tokens, top-8 of 64
experts, F 768, H 2,048), ms per layer and micro-batch:
  grouped_bf16:      the two grouped weight-gradient GEMMs (gate+up, down) in
                     bf16, as autograd computes them now;
  grouped_bf16_add:  the same, then added into fp32 accumulators (what the
                     step pays before the next micro-batch);
  per_expert_fp32_sN: one GEMM per expert and projection reading and writing
                     the fp32 accumulator as its C (addmm with out_dtype), the
                     experts spread over N streams; in a CUDA graph, so the
                     time is the GPU's, not Python's launches.
Prints one JSON line per case, with the largest error against fp64.
Usage: python3 bench/gpu/probes/expert_wgrad.py [--iters 20]
"""
import argparse
import json

import torch

from gpu_timing import timed

H, FF, E, TOPK, TOKENS = 2048, 768, 64, 8, 16384


def graphed(fn):
    """fn captured once into a CUDA graph; returns its replay."""
    fn()  # warm cuBLAS handles and workspaces outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    dev, bf, f32 = "cuda", torch.bfloat16, torch.float32
    m = TOKENS * TOPK
    counts = torch.distributions.Multinomial(m, torch.ones(E)).sample().to(torch.int64)
    ends = counts.cumsum(0)
    offs = ends.to(torch.int32).to(dev)
    starts = [0] + ends.tolist()[:-1]
    sizes = counts.tolist()
    x = torch.randn(m, H, device=dev, dtype=bf)
    dgu = torch.randn(m, 2 * FF, device=dev, dtype=bf)
    h = torch.randn(m, FF, device=dev, dtype=bf)
    dy = torch.randn(m, H, device=dev, dtype=bf)
    acc_gu = torch.zeros(E, 2 * FF, H, device=dev, dtype=f32)
    acc_d = torch.zeros(E, H, FF, device=dev, dtype=f32)

    def grouped():
        return (torch._grouped_mm(dgu.t(), x, offs=offs),
                torch._grouped_mm(dy.t(), h, offs=offs))

    def grouped_add():
        wgu, wd = grouped()
        acc_gu.add_(wgu)
        acc_d.add_(wd)

    def per_expert(streams):
        def run():
            main_stream = torch.cuda.current_stream()
            for s in streams:
                s.wait_stream(main_stream)
            for e in range(E):
                a, n = starts[e], sizes[e]
                with torch.cuda.stream(streams[e % len(streams)]):
                    torch.addmm(acc_gu[e], dgu[a:a + n].t(), x[a:a + n], out_dtype=f32,
                                out=acc_gu[e])
                    torch.addmm(acc_d[e], dy[a:a + n].t(), h[a:a + n], out_dtype=f32,
                                out=acc_d[e])
            for s in streams:
                main_stream.wait_stream(s)
        return run

    flop = 2 * m * (2 * FF * H + H * FF)
    cases = [("grouped_bf16", grouped), ("grouped_bf16_add", grouped_add)]
    for n in (1, 2, 4, 8):
        cases.append((f"per_expert_fp32_s{n}",
                      graphed(per_expert([torch.cuda.Stream() for _ in range(n)]))))
    for name, fn in cases:
        ms = timed(fn, args.iters)
        print(json.dumps({"case": name, "ms": round(ms, 3),
                          "tflops": round(flop / ms / 1e9, 1)}), flush=True)

    # Correctness of the fp32 path on one expert: acc starts at a known value.
    e = max(range(E), key=lambda i: sizes[i])
    a, n = starts[e], sizes[e]
    base = torch.randn(2 * FF, H, device=dev, dtype=f32)
    got = base.clone()
    torch.addmm(got, dgu[a:a + n].t(), x[a:a + n], out_dtype=f32, out=got)
    want = base.double() + dgu[a:a + n].t().double() @ x[a:a + n].double()
    bf16_then_add = base + torch.mm(dgu[a:a + n].t(), x[a:a + n]).float()
    print(json.dumps({"case": "error_vs_fp64", "expert_rows": n,
                      "fp32_accumulate_max_abs": (got.double() - want).abs().max().item(),
                      "bf16_then_add_max_abs": (bf16_then_add.double() - want).abs().max().item(),
                      "scale_max_abs": want.abs().max().item()}), flush=True)


if __name__ == "__main__":
    main()
