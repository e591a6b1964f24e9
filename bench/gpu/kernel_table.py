#!/usr/bin/env python3
"""A step's CUDA kernels by time and kind, the same table for PyTorch's profile
(pytorch_moe.py --profile) and trellis-train's (TRELLIS_PROFILE_STEPS):

    kernel_table.py TSV STEPS OUT    # TSV: "<total us>\\t<calls>\\t<kernel>" lines
"""
import sys

# The kinds a CUDA kernel's name tells: the GEMMs and attention are compute-bound,
# the rest (elementwise, reductions, copies, casts, softmax) mostly memory-bound:
# what torch.compile fuses.
KERNEL_KINDS = (("gemm", ("gemm", "cutlass", "nvjet", "sm90_xmma", "grouped", "matmul")),
                ("attention", ("flash", "fmha", "attention", "sdpa")),
                ("nccl", ("nccl",)),
                ("copy and cast", ("copy", "cast", "convert", "to_copy")))


def kernel_kind(name):
    low = name.lower()
    for kind, keys in KERNEL_KINDS:
        if any(k in low for k in keys):
            return kind
    return "other (elementwise, reductions)"


def write_table(rows, steps, path):
    """rows: (total ms over `steps` steps, calls over them, kernel name)."""
    rows = sorted(((ms / steps, calls // steps, name) for ms, calls, name in rows), reverse=True)
    kinds = {}
    for ms, _, name in rows:
        kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0) + ms
    total = sum(kinds.values()) or 1.0
    with open(path, "w") as f:
        f.write(f"CUDA kernel time per step (mean of {steps} steps): {total:.1f} ms\n\n")
        for kind, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
            f.write(f"{kind:34s} {ms:8.1f} ms  {100 * ms / total:5.1f}%\n")
        f.write("\nms/step  calls/step  kernel\n")
        for ms, calls, name in rows[:40]:
            f.write(f"{ms:7.2f}  {calls:10d}  {name[:150]}\n")


def main():
    tsv, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rows = []
    for line in open(tsv):
        us, calls, name = line.rstrip("\n").split("\t", 2)
        rows.append((int(us) / 1e3, int(calls), name))
    write_table(rows, steps, out)


if __name__ == "__main__":
    main()
