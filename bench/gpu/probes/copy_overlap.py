"""Whether a large device-to-host copy on a stream of its own hides behind
compute, and what small host transfers on the compute stream do to that:
what `checkpoint.async`'s copy of a rank's state meets in a training step
(the step's token rows go host-to-device each micro-batch; the gradient norm
and the step's figures come back to the host).

The copy: --gib GiB (default 6, a 2-layer moe-bench rank) from device memory
into page-locked host memory (cudaHostRegister'd, as trainer_core's arenas):
queued whole, queued at once in pieces, or paced: pieces queued by a thread
of their own, at most two in flight at a time. The compute: --iters bf16
GEMMs of 8192^3 on the default stream, with a small transfer every --every
GEMMs (none, 128 KiB host-to-device from pinned memory, or a scalar read to
the host). Each case reports the compute stream's time (device and wall)
and the wall time until the copy ended too.
Prints one JSON line per case.
Usage: python3 bench/gpu/probes/copy_overlap.py [--gib 6] [--iters 200] [--every 25]
"""
import argparse
import json
import threading
import time

import torch


def registered_host(nbytes):
    """A page-locked host buffer made as trainer_core makes its arenas."""
    buf = torch.empty(nbytes, dtype=torch.uint8)
    err = torch.cuda.cudart().cudaHostRegister(buf.data_ptr(), nbytes, 0)
    if (err.value if hasattr(err, "value") else int(err)) != 0:
        raise SystemExit(f"cudaHostRegister of {nbytes} bytes: {err}")
    return buf


def start_copy(host, dev, stream, chunk):
    """The device-to-host copy queued on `stream` after the current stream's work."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        n = dev.numel()
        step = chunk if chunk else n
        for at in range(0, n, step):
            host[at:at + step].copy_(dev[at:at + step], non_blocking=True)
        done = torch.cuda.Event()
        done.record()
    return done


def start_paced_copy(host, dev, stream, chunk, window=2):
    """The copy in `chunk` pieces, queued by a thread with at most `window` in
    flight: a small copy of another stream then waits behind a piece, not the whole."""
    stream.wait_stream(torch.cuda.current_stream())

    def run():
        with torch.cuda.stream(stream):
            queued = []
            for at in range(0, dev.numel(), chunk):
                if len(queued) >= window:
                    queued.pop(0).synchronize()
                host[at:at + chunk].copy_(dev[at:at + chunk], non_blocking=True)
                queued.append(torch.cuda.Event())
                queued[-1].record()
            for e in queued:
                e.synchronize()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def compute(a, iters, every, transfer, small_host, small_dev):
    for i in range(iters):
        torch.mm(a, a)
        if every and i % every == 0:
            if transfer == "h2d":
                small_dev.copy_(small_host, non_blocking=True)
            elif transfer == "d2h_read":
                a[0, 0].item()


def case(name, a, host, dev, side, args, transfer, chunk, with_copy, paced=False):
    small_host = torch.zeros(128 * 1024 // 8, dtype=torch.long).pin_memory()
    small_dev = torch.zeros_like(small_host, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    done = None
    if with_copy:
        done = (start_paced_copy if paced else start_copy)(host, dev, side, chunk)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    compute(a, args.iters, args.every, transfer, small_host, small_dev)
    end.record()
    end.synchronize()
    compute_wall = time.perf_counter() - t0
    if done is not None:
        done.join() if paced else done.synchronize()
    total_wall = time.perf_counter() - t0
    return {"case": name, "transfer": transfer, "chunk_mib": chunk >> 20 if chunk else None,
            "paced": paced,
            "copy": with_copy, "compute_ms": start.elapsed_time(end),
            "compute_wall_ms": compute_wall * 1e3, "total_wall_ms": total_wall * 1e3}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gib", type=float, default=6.0)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--every", type=int, default=25)
    args = p.parse_args()
    nbytes = int(args.gib * (1 << 30))
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
    host = registered_host(nbytes)
    side = torch.cuda.Stream()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    compute(a, 10, 0, "none", None, None)  # warm up

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    start_copy(host, dev, side, 0).synchronize()
    copy_s = time.perf_counter() - t0
    print(json.dumps({"case": "copy alone", "gib": args.gib, "copy_ms": copy_s * 1e3,
                      "gb_per_s": nbytes / copy_s / 1e9}), flush=True)
    for chunk in (32 << 20, 8 << 20):
        t0 = time.perf_counter()
        start_paced_copy(host, dev, side, chunk).join()
        copy_s = time.perf_counter() - t0
        print(json.dumps({"case": "paced copy alone", "chunk_mib": chunk >> 20,
                          "copy_ms": copy_s * 1e3, "gb_per_s": nbytes / copy_s / 1e9}), flush=True)
    for transfer in ("none", "h2d", "d2h_read"):
        print(json.dumps(case("compute alone", a, host, dev, side, args, transfer, 0, False)),
              flush=True)
        for chunk in (0, 64 << 20, 8 << 20):
            print(json.dumps(case("compute beside the copy", a, host, dev, side, args, transfer,
                                  chunk, True)), flush=True)
        for chunk in (32 << 20, 8 << 20):
            print(json.dumps(case("compute beside the paced copy", a, host, dev, side, args,
                                  transfer, chunk, True, paced=True)), flush=True)


if __name__ == "__main__":
    main()
