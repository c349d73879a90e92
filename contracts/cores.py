"""How many CPUs this process may run on now: what the ingest's CSV parse (one span ahead) and
raw archive (compressing workers) ask before they work in parallel. On one core (a Ray ingest
task's, ingest/fanout.py `confined_to_cpus`) parallel work saves no time and holds more memory."""

from __future__ import annotations

import os


def available_cores() -> int:
    """CPUs this process may run on now (its affinity where the system says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


__all__ = ["available_cores"]
