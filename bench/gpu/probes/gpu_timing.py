"""What the probes share: the mean GPU time of a callable."""
import torch


def timed(fn, iters):
    """fn's mean time in ms over `iters` calls, after 3 untimed ones (CUDA events)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters
