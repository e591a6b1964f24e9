#!/usr/bin/env python3
"""The bench's rank: a generic Trellis command that trains STEPS steps of
STEP_S seconds (sleeps), reports each on $TRELLIS_STEP_SOCKET, checkpoints
and resumes, as a trainer would, on no CPU to speak of.

The ranks step together, as a data-parallel trainer's do: after each step
every rank sends rank 0 (a TCP server on $MASTER_ADDR:$MASTER_PORT) its step
and whether it was asked to stop, and goes on when rank 0 answers, once it
has heard every rank (an all-reduce, in effect). So a rank that dies ends the
others (they see its connection close and exit 1, as after a NCCL error), and
a rank that stops (SIGSTOP) stalls them all, as a hung collective would.

Checkpoints: a checkpoint of step N is complete once every rank of the world
wrote its shard (step-NNNNNNNN/rank-R under $TRELLIS_CHECKPOINT_DIR, after
CKPT_COST_S seconds of "writing": the steps stop meanwhile) and the last one
wrote manifest.json (the controller resumes from the newest step with a
manifest). When:
  CKPT_EVERY=N     every N steps (N a multiple of the step number);
  CKPT_EVERY=auto  as often as it pays, by the rule of the trainer's
                   checkpoint.every_steps = "auto" (common/checkpoint_interval.h):
                   Young's sqrt(2 x cost x MTBF), MTBF from $TRELLIS_MTBF_S (the
                   controller's failure rate of the launch's nodes), between
                   AUTO_MIN_S and AUTO_MAX_S (the trainer's defaults, 60 s and
                   4 h); a launch's first checkpoint after AUTO_MIN_S of steps.
                   Rank 0's record of each choice carries checkpoint_every_steps
                   and the figures, which the controller shows as a
                   checkpoint_interval event. The figures are the nominal ones
                   (STEP_S, CKPT_COST_S): every rank computes the same choice
                   without talking to the others (the trainer's ranks agree on
                   measured ones through an all-reduce).
On SIGUSR1 (Slurm's warning before the time limit, or a continuation's
handoff) the ranks stop together after the step in which any of them got it
(rank 0's answer says so), checkpoint it and exit 0; the signal may come
twice, so it is ignored from then on. With CKPT_AT_STOP=0 they exit without
one. The run ends after step STEPS, with a checkpoint."""
import json
import math
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
world = int(os.environ["WORLD_SIZE"])
steps = int(os.environ.get("STEPS", "2400"))
step_s = float(os.environ.get("STEP_S", "0.5"))
cost_s = float(os.environ.get("CKPT_COST_S", "5"))
every = os.environ.get("CKPT_EVERY", "240")
auto = every == "auto"
every_n = 0 if auto else int(every)
auto_min_s = float(os.environ.get("AUTO_MIN_S", "60"))
auto_max_s = float(os.environ.get("AUTO_MAX_S", "14400"))
connect_timeout_s = float(os.environ.get("CONNECT_TIMEOUT_S", "120"))
ckpt_at_stop = os.environ.get("CKPT_AT_STOP", "1") == "1"
ckpt_dir = os.environ.get("TRELLIS_CHECKPOINT_DIR", "")
mtbf_s = float(os.environ.get("TRELLIS_MTBF_S", "0") or "0")
if mtbf_s <= 0:  # no figure from the controller: the trainer's default, 1 in 5,000 node-hours
    mtbf_s = 5000 * 3600 / max(1, world // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))

print("rank %d pid %d attempt %s launch %s on %s" % (
    rank, os.getpid(), os.environ.get("TRELLIS_ATTEMPT"), os.environ.get("TRELLIS_LAUNCH"),
    os.environ.get("SLURMD_NODENAME")), flush=True)


def checkpoint(step):
    """This rank's shard of step's checkpoint; the last shard completes it."""
    if not ckpt_dir:
        return
    d = os.path.join(ckpt_dir, "step-%08d" % step)
    os.makedirs(d, exist_ok=True)
    time.sleep(cost_s)
    tmp = os.path.join(d, ".rank-%d.tmp" % rank)
    with open(tmp, "w") as f:
        json.dump({"step": step, "rank": rank}, f)
    os.rename(tmp, os.path.join(d, "rank-%d" % rank))
    if all(os.path.exists(os.path.join(d, "rank-%d" % r)) for r in range(world)):
        tmp = os.path.join(d, ".manifest.%d.tmp" % rank)
        with open(tmp, "w") as f:
            json.dump({"step": step, "world": world}, f)
        os.rename(tmp, os.path.join(d, "manifest.json"))


def young_steps():
    """checkpoint.every_steps = "auto"'s choice: Young's period within the bounds, in steps."""
    period = min(max(math.sqrt(2 * cost_s * mtbf_s), auto_min_s), auto_max_s)
    return max(1, int(round(period / step_s)))


def fail(why):
    print("rank %d: %s" % (rank, why), file=sys.stderr, flush=True)
    sys.exit(1)


class Group:
    """The ranks' per-step exchange: rank 0 serves, the others connect."""

    def __init__(self):
        self.peers = []
        self.up = None
        addr = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "0")))
        deadline = time.time() + connect_timeout_s
        if world == 1:
            return
        if rank == 0:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("", addr[1]))
            srv.listen(world)
            srv.settimeout(1)
            while len(self.peers) < world - 1:
                if time.time() > deadline:
                    fail("only %d of %d ranks connected in %.0f s" % (
                        len(self.peers) + 1, world, connect_timeout_s))
                try:
                    c, _ = srv.accept()
                except socket.timeout:
                    continue
                c.settimeout(None)
                self.peers.append(c.makefile("rw"))
            srv.close()
        else:
            while True:
                try:
                    c = socket.create_connection(addr, timeout=5)
                    break
                except OSError:
                    if time.time() > deadline:
                        fail("cannot reach rank 0 at %s:%d" % addr)
                    time.sleep(0.2)
            c.settimeout(None)
            self.up = c.makefile("rw")

    def step(self, step, stop):
        """Every rank's `stop` or'ed, once all ranks finished `step`."""
        if world == 1:
            return stop
        try:
            if rank == 0:
                for p in self.peers:
                    line = p.readline()
                    if not line:
                        fail("a rank left the group after step %d (its connection closed)" % step)
                    their_step, their_stop = line.split()
                    if int(their_step) != step:
                        fail("a rank is at step %s, this one at %d" % (their_step, step))
                    stop = stop or their_stop == "1"
                for p in self.peers:
                    p.write("%d\n" % stop)
                    p.flush()
                return stop
            self.up.write("%d %d\n" % (step, stop))
            self.up.flush()
            line = self.up.readline()
            if not line:
                fail("rank 0 left the group after step %d (its connection closed)" % step)
            return line.strip() == "1"
        except OSError as e:
            fail("the group failed after step %d: %s" % (step, e))


group = Group()
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["TRELLIS_STEP_SOCKET"])
resume = int(os.environ.get("TRELLIS_RESUME_STEP", "-1") or "-1")
first = max(resume, 0) + 1
next_auto = first - 1 + max(1, int(math.ceil(auto_min_s / step_s)))
print("rank %d starts at step %d (checkpoints: %s, mtbf %.0f s)" % (
    rank, first, "auto" if auto else "every %d steps" % every_n, mtbf_s), flush=True)
for step in range(first, steps + 1):
    t0 = time.time()
    time.sleep(step_s)
    stop = group.step(step, warned) and step < steps
    rec = {"v": 1, "step": step, "loss": 5.0 / math.sqrt(step), "tokens": 1024,
           "step_seconds": time.time() - t0}
    due = step == steps or (auto and step == next_auto) or (every_n > 0 and step % every_n == 0)
    if stop and ckpt_at_stop or due:
        c0 = time.time()
        checkpoint(step)
        rec["checkpoint_seconds"] = time.time() - c0
        if auto and step == next_auto:
            n = young_steps()
            next_auto = step + n
            if rank == 0:
                rec["checkpoint_every_steps"] = n
                rec["checkpoint_choice_cost_seconds"] = cost_s
                rec["checkpoint_choice_step_seconds"] = step_s
                print("checkpoint.every_steps = \"auto\" after step %d: every %d steps "
                      "(sqrt(2 x %.1f s x %.0f s) = %.1f s, within [%.0f, %.0f] s)" % (
                          step, n, cost_s, mtbf_s, math.sqrt(2 * cost_s * mtbf_s), auto_min_s,
                          auto_max_s), flush=True)
    s.sendall((json.dumps(rec) + "\n").encode())
    if stop:
        print("rank %d: stop asked (SIGUSR1): stopped after step %d" % (rank, step), flush=True)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        sys.exit(0)
print("rank %d done at step %d" % (rank, steps), flush=True)
