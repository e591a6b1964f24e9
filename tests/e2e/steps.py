#!/usr/bin/env python3
"""A generic rank for the healing tests: reports STEPS step records on
$TRELLIS_STEP_SOCKET, one every STEP_S seconds (SLOW_FACTOR times longer on
rank SLOW_RANK), and exits EXIT_CODE (0 unless set). With CKPT_EVERY=n,
rank 0 writes a checkpoint after every n-th step. Prints its pid and
launch first, so a test can find and signal it.

It keeps the rank contract's time limits (README, "Time limits"): it starts
after $TRELLIS_RESUME_STEP, and on SIGUSR1 (Slurm's wall-time warning) it
ends its step, rank 0 writes a checkpoint of it (step-NNNNNNNN/manifest.json
under $TRELLIS_CHECKPOINT_DIR; not with CKPT_AT_WARNING=0, a program that
breaks the contract), and it exits 0. With STOP_ALIGN=k it stops at the next
step that is a multiple of k instead: ranks whose steps drift apart by less
than k steps stop at the same one, as the trainer's ranks agree on theirs."""
import json
import os
import signal
import socket
import sys
import time

warned = False


def on_warning(signum, frame):
    global warned
    warned = True


signal.signal(signal.SIGUSR1, on_warning)

rank = int(os.environ["RANK"])
steps = int(os.environ.get("STEPS", "20"))
step_s = float(os.environ.get("STEP_S", "0.2"))
if os.environ.get("SLOW_RANK") == str(rank):
    step_s *= float(os.environ.get("SLOW_FACTOR", "3"))
exit_code = int(os.environ.get("EXIT_CODE", "0"))
print("rank %d pid %d launch %s on %s" % (rank, os.getpid(), os.environ.get("TRELLIS_LAUNCH"),
                                          os.environ.get("SLURMD_NODENAME")), flush=True)
ckpt_every = int(os.environ.get("CKPT_EVERY", "0"))
ckpt_at_warning = os.environ.get("CKPT_AT_WARNING", "1") == "1"
stop_align = max(1, int(os.environ.get("STOP_ALIGN", "1")))


def checkpoint(step):
    """A complete checkpoint is a directory whose manifest.json exists."""
    ckpt = os.environ.get("TRELLIS_CHECKPOINT_DIR", "")
    if not ckpt:
        return
    d = os.path.join(ckpt, "step-%08d" % step)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".manifest.tmp"), "w") as f:
        json.dump({"step": step}, f)
    os.rename(os.path.join(d, ".manifest.tmp"), os.path.join(d, "manifest.json"))


s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["TRELLIS_STEP_SOCKET"])
resume = int(os.environ.get("TRELLIS_RESUME_STEP", "-1") or "-1")
first = max(resume, 0) + 1
print("rank %d starts at step %d" % (rank, first), flush=True)
# Each step ends on a deadline of the rank's clock, not a sleep after the last:
# a loaded machine delays a step, not every step after it, so ranks that share
# no collective do not drift apart (STOP_ALIGN holds them within k steps). A
# rank more than a step late (it was stopped) catches up one step, no burst.
deadline = time.time()
for step in range(first, steps + 1):
    t0 = time.time()
    deadline = max(deadline, t0 - step_s) + step_s
    time.sleep(max(0.0, deadline - time.time()))
    rec = {"v": 1, "step": step, "loss": 5.0 / step, "tokens": 1024,
           "step_seconds": time.time() - t0}
    s.sendall((json.dumps(rec) + "\n").encode())
    if rank == 0 and ckpt_every > 0 and step % ckpt_every == 0:
        checkpoint(step)
    if warned and step < steps and step % stop_align == 0:
        if rank == 0 and ckpt_at_warning:
            checkpoint(step)
        print("rank %d: wall-time warning: stopped after step %d" % (rank, step), flush=True)
        # The warning may come again (Slurm signals every process of the step and
        # the worker passes it on too), and Python's exit puts back the default
        # action, which kills: a rank stopped cleanly died of SIGUSR1 and its
        # worker's bad exit cut the other nodes' checkpoint short.
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        sys.exit(0)
if exit_code == 79:
    print("bad input: refusing to go on (exit 79: do not retry)", file=sys.stderr, flush=True)
sys.exit(exit_code)
