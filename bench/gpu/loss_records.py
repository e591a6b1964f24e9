"""trellis-train --json step records and their losses, shared by the GPU scripts'
tables and checks (offload_table.py, check_losses.py)."""
import json
import os


def records_of(path):
    """The step records of a trellis-train --json output (other lines skipped);
    none where the file does not exist."""
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.startswith("{")]


def relative_diffs(losses, reference):
    """|loss - reference| / |reference|, step by step over the common steps."""
    return [abs(a - b) / abs(b) for a, b in zip(losses, reference)]


def first_step_over(diffs, limit):
    """The first step (1-based) whose difference is over `limit`, or None."""
    return next((i + 1 for i, d in enumerate(diffs) if d > limit), None)


def drift(losses, reference):
    """The first step (1-based) whose loss differs from the reference's, and the
    largest relative difference over the common steps."""
    diffs = relative_diffs(losses, reference)
    return first_step_over(diffs, 0.0), max(diffs, default=0.0)
