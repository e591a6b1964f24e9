"""Whether a large device-to-host copy on a stream of its own hides behind
compute, and what small transfers on the compute stream do to that: what
`checkpoint.async`'s copy of a rank's state meets in a training step (the
step's token rows go host-to-device each micro-batch; the step's figures come
back to the host at its end).

The copy: --gib GiB (default 6, a 2-layer moe-bench rank) from device memory
into page-locked host memory (cudaHostRegister'd, as trainer_core's arenas),
on a stream of its own, made by
  engine  one cudaMemcpyAsync (a copy engine), queued whole;
  paced   the same in 32 MiB pieces queued by a thread, at most two in flight;
  kernel  an elementwise kernel writing the host memory through its device
          mapping (no copy engine; it takes SMs instead).
The compute: --iters bf16 GEMMs of 8192^3 on the default stream, with a
small transfer every --every GEMMs:
  h2d          128 KiB host-to-device from pinned memory;
  read_item    a scalar read to the host, `.item()` (to pageable memory);
  read_pinned  the scalar copied into pinned memory, then an event waited on;
  read_mapped  the scalar written by a kernel into mapped pinned memory, then
               an event waited on (no copy engine).
Each case reports the compute stream's time (device and wall) and the wall
time until the copy ended too. Prints one JSON line per case, then a table.
Usage: python3 bench/gpu/probes/copy_overlap.py [--gib 6] [--iters 200] [--every 25]
"""
import argparse
import json
import threading
import time

import torch

COPIES = ("none", "engine", "paced", "kernel")
TRANSFERS = ("none", "h2d", "read_item", "read_pinned", "read_mapped")


def registered_host(nbytes):
    """A page-locked host buffer made as trainer_core makes its arenas."""
    buf = torch.empty(nbytes, dtype=torch.uint8)
    err = torch.cuda.cudart().cudaHostRegister(buf.data_ptr(), nbytes, 0)
    if (err.value if hasattr(err, "value") else int(err)) != 0:
        raise SystemExit(f"cudaHostRegister of {nbytes} bytes: {err}")
    return buf


class _Interface:
    def __init__(self, ptr, numel, typestr):
        self.__cuda_array_interface__ = {"shape": (numel,), "typestr": typestr,
                                         "data": (ptr, False), "version": 2}


def device_view(host, dtype, typestr):
    """Page-locked host memory as a CUDA tensor (its mapping in the device's
    address space, the same pointer under unified addressing): a kernel
    writing it writes host memory, with no copy engine."""
    flat = host.view(dtype)
    return torch.as_tensor(_Interface(flat.data_ptr(), flat.numel(), typestr), device="cuda")


def start_copy(how, host, dev, host_on_device, stream):
    """The device-to-host copy on `stream`, after the current stream's work;
    returns something with .wait()."""
    stream.wait_stream(torch.cuda.current_stream())
    if how == "paced":
        chunk, window = 32 << 20, 2

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
        thread.wait = thread.join
        return thread
    with torch.cuda.stream(stream):
        if how == "engine":
            host.copy_(dev, non_blocking=True)
        else:  # kernel: 8-byte words, a bitwise or with 0 (an elementwise kernel, not a memcpy)
            torch.bitwise_or(dev.view(torch.int64), 0, out=host_on_device)
        done = torch.cuda.Event()
        done.record()
    done.wait = done.synchronize
    return done


class Small:
    """The step's small transfers: buffers made once."""

    def __init__(self):
        self.h2d_host = torch.zeros(128 * 1024 // 8, dtype=torch.long).pin_memory()
        self.h2d_dev = torch.zeros_like(self.h2d_host, device="cuda")
        self.pinned = torch.zeros(1, dtype=torch.bfloat16).pin_memory()
        self.mapped = torch.zeros(1, dtype=torch.int16).pin_memory()
        self.mapped_on_device = device_view(self.mapped, torch.int16, "<i2")
        self.event = torch.cuda.Event()

    def transfer(self, how, a):
        if how == "h2d":
            self.h2d_dev.copy_(self.h2d_host, non_blocking=True)
        elif how == "read_item":
            a[0, 0].item()
        elif how == "read_pinned":
            self.pinned.copy_(a[0, 0:1], non_blocking=True)
            self.event.record()
            self.event.synchronize()
            float(self.pinned[0])
        elif how == "read_mapped":
            torch.bitwise_or(a[0, 0:1].view(torch.int16), 0, out=self.mapped_on_device)
            self.event.record()
            self.event.synchronize()
            int(self.mapped[0])


def compute(a, iters, every, transfer, small):
    for i in range(iters):
        torch.mm(a, a)
        if every and i % every == 0:
            small.transfer(transfer, a)


def case(copy, transfer, a, host, dev, host_on_device, side, small, args):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    done = None if copy == "none" else start_copy(copy, host, dev, host_on_device, side)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    compute(a, args.iters, args.every, transfer, small)
    end.record()
    end.synchronize()
    compute_wall = time.perf_counter() - t0
    if done is not None:
        done.wait()
    total_wall = time.perf_counter() - t0
    return {"copy": copy, "transfer": transfer, "compute_ms": start.elapsed_time(end),
            "compute_wall_ms": compute_wall * 1e3, "total_wall_ms": total_wall * 1e3}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gib", type=float, default=6.0)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--every", type=int, default=25)
    args = p.parse_args()
    nbytes = int(args.gib * (1 << 30)) // 8 * 8
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
    host = registered_host(nbytes)
    host_on_device = device_view(host, torch.int64, "<i8")
    side = torch.cuda.Stream()
    small = Small()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    compute(a, 10, 0, "none", small)  # warm up

    # The mapped read is right: a kernel's write reaches the host.
    torch.bitwise_or(a[0, 0:1].view(torch.int16), 0, out=small.mapped_on_device)
    torch.cuda.synchronize()
    assert int(small.mapped[0]) == int(a[0, 0:1].view(torch.int16).cpu()[0]), "mapped read"
    alone = {}
    for how in COPIES[1:]:
        dev.fill_(7 if how == "kernel" else 1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start_copy(how, host, dev, host_on_device, side).wait()
        s = time.perf_counter() - t0
        assert int(host[nbytes // 2]) == (7 if how == "kernel" else 1), how
        alone[how] = s * 1e3
        print(json.dumps({"case": "copy alone", "copy": how, "gib": args.gib, "copy_ms": s * 1e3,
                          "gb_per_s": nbytes / s / 1e9}), flush=True)
    rows = {}
    for transfer in TRANSFERS:
        for copy in COPIES:
            r = case(copy, transfer, a, host, dev, host_on_device, side, small, args)
            rows[(transfer, copy)] = r
            print(json.dumps(r), flush=True)
    print(f"\n{args.gib} GiB copy alone: " +
          ", ".join(f"{h} {alone[h]:.1f} ms ({nbytes / alone[h] / 1e6:.1f} GB/s)" for h in alone))
    print("compute wall ms (total wall until the copy ended too)")
    print("| transfer | " + " | ".join(COPIES) + " |")
    print("|---" * (len(COPIES) + 1) + "|")
    for transfer in TRANSFERS:
        cells = []
        for copy in COPIES:
            r = rows[(transfer, copy)]
            cells.append(f"{r['compute_wall_ms']:.1f}" +
                         ("" if copy == "none" else f" ({r['total_wall_ms']:.1f})"))
        print(f"| {transfer} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
