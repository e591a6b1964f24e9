#!/usr/bin/env python3
"""A generic rank for the metrics test: reports STEPS step records on
$TRELLIS_STEP_SOCKET, one every STEP_S seconds (SLOW_FACTOR times longer on
rank SLOW_RANK), carrying every optional field of the step record contract, so
every rank family of the worker has a series. Rank FAIL_RANK of launch
FAIL_LAUNCH exits 3 after FAIL_AFTER steps (a restart the test causes). After
its last step a rank stays alive (its series with it) until HOLD_FILE exists,
at most HOLD_MAX_S seconds, then exits 0."""
import json
import os
import socket
import sys
import time

env = os.environ
rank = int(env["RANK"])
launch = env.get("TRELLIS_LAUNCH", "1")
steps = int(env.get("STEPS", "20"))
step_s = float(env.get("STEP_S", "0.2"))
if env.get("SLOW_RANK") == str(rank):
    step_s *= float(env.get("SLOW_FACTOR", "3"))
fails = env.get("FAIL_RANK") == str(rank) and env.get("FAIL_LAUNCH", "1") == launch
fail_after = int(env.get("FAIL_AFTER", "5"))
ctas = int(env.get("NCCL_MAX_CTAS", "16"))
print("rank %d pid %d launch %s on %s" % (rank, os.getpid(), launch, env.get("SLURMD_NODENAME")),
      flush=True)

s = socket.socket(socket.AF_UNIX)
s.connect(env["TRELLIS_STEP_SOCKET"])
GiB, MiB = 1 << 30, 1 << 20
for step in range(1, steps + 1):
    if fails and step > fail_after:
        print("rank %d fails on purpose after step %d" % (rank, fail_after), file=sys.stderr,
              flush=True)
        sys.exit(3)
    t0 = time.time()
    time.sleep(step_s)
    dt = time.time() - t0
    allocated = (1 + rank) * GiB + step * MiB
    rec = {"v": 1, "step": step, "loss": 5.0 / step, "tokens": 1024, "step_seconds": dt,
           "grad_norm": 1.0 + 1.0 / step,
           "fwd_seconds": 0.3 * dt, "bwd_seconds": 0.4 * dt, "optim_seconds": 0.1 * dt,
           "comm_seconds": 0.3 * dt, "exposed_comm_seconds": 0.1 * dt,
           "alloc_retries": (step + rank) // 4,
           "mem_allocated_peak_bytes": allocated, "mem_reserved_peak_bytes": allocated + 512 * MiB,
           "host_arena_bytes": 256 * MiB, "nccl_max_ctas": ctas,
           "checkpoint_step": step // 10 * 10,
           # The step's routing figures, the same on every rank.
           "expert_load_max_over_mean": 1.5 + step / 100, "ep_load_max_over_mean": 1 + step / 100}
    if step % 10 == 0:  # the checkpoint after this step (checkpoint_step moves to it)
        rec["checkpoint_seconds"] = 0.5 * dt
    s.sendall((json.dumps(rec) + "\n").encode())

hold = env.get("HOLD_FILE")
deadline = time.time() + float(env.get("HOLD_MAX_S", "300"))
while hold and not os.path.exists(hold) and time.time() < deadline:
    time.sleep(0.1)
