#!/usr/bin/env python3
"""A generic rank for the healing tests: reports STEPS step records on
$TRELLIS_STEP_SOCKET, one every STEP_S seconds (SLOW_FACTOR times longer on
rank SLOW_RANK), and exits EXIT_CODE (0 unless set). Prints its pid and
launch first, so a test can find and signal it."""
import json
import os
import socket
import sys
import time

rank = int(os.environ["RANK"])
steps = int(os.environ.get("STEPS", "20"))
step_s = float(os.environ.get("STEP_S", "0.2"))
if os.environ.get("SLOW_RANK") == str(rank):
    step_s *= float(os.environ.get("SLOW_FACTOR", "3"))
exit_code = int(os.environ.get("EXIT_CODE", "0"))
print("rank %d pid %d launch %s on %s" % (rank, os.getpid(), os.environ.get("TRELLIS_LAUNCH"),
                                          os.environ.get("SLURMD_NODENAME")), flush=True)
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["TRELLIS_STEP_SOCKET"])
for step in range(1, steps + 1):
    t0 = time.time()
    time.sleep(step_s)
    rec = {"v": 1, "step": step, "loss": 5.0 / step, "tokens": 1024,
           "step_seconds": time.time() - t0}
    s.sendall((json.dumps(rec) + "\n").encode())
if exit_code == 79:
    print("bad input: refusing to go on (exit 79: do not retry)", file=sys.stderr, flush=True)
sys.exit(exit_code)
