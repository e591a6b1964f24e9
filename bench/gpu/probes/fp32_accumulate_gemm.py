"""Whether this PyTorch multiplies bf16 matrices into an fp32 accumulator in
one GEMM (mm/addmm with out_dtype), and what that saves against a bf16 GEMM
followed by an fp32 add: the cross entropy's head-gradient step, a chunk of
2,048 rows of moe-bench's 32,000-way head. Prints one JSON line.
Usage: python3 bench/gpu/probes/fp32_accumulate_gemm.py
"""
import json

import torch

from gpu_timing import timed

V, H, ROWS = 32000, 2048, 2048
ITERS = 50


def main():
    torch.manual_seed(0)
    g = torch.randn(ROWS, V, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(ROWS, H, device="cuda", dtype=torch.bfloat16)
    acc = torch.randn(V, H, device="cuda", dtype=torch.float32)
    out = {"torch": torch.__version__}
    out["bf16_gemm_then_fp32_add_ms"] = timed(lambda: acc.add_(torch.mm(g.t(), x)), ITERS)
    try:
        want = acc + (g.t().double() @ x.double()).float()
        got = torch.addmm(acc, g.t(), x, out_dtype=torch.float32)
        out["addmm_out_dtype_max_abs_err"] = (got - want).abs().max().item()
        out["addmm_out_dtype_ms"] = timed(
            lambda: torch.addmm(acc, g.t(), x, out_dtype=torch.float32, out=acc), ITERS)
        ref = acc.clone()
        torch.addmm(acc, g.t(), x, out_dtype=torch.float32, out=acc)
        out["addmm_in_place_max_abs_err"] = (
            acc - (ref + (g.t().double() @ x.double()).float())).abs().max().item()
    except (RuntimeError, TypeError) as e:
        out["addmm_out_dtype_error"] = str(e).splitlines()[0][:200]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
