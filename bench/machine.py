"""What a bench/ result records about where and when it ran, the same way in
every script that writes one (the scripts run from the repository root:
sys.path.insert(0, "bench"); import machine)."""
import os
from datetime import datetime, timezone


def describe(gpu=""):
    """'<cores> cores, <CPU model>', and '; <gpu>' where a GPU ran it."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "")
    return f"{os.cpu_count()} cores, {cpu}" + (f"; {gpu}" if gpu else "")


def now_utc():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
