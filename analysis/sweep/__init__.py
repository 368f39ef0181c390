"""Sweeps: YAML grids of models x policies x hardware x workloads, run locally or on Dask, resumable."""

from __future__ import annotations

import os


def default_workers() -> int:
    """Local worker processes by default: the cores this process may run on (light: `mpsim sweep
    --help` prints it without loading the sweep machinery)."""
    return max(1, len(os.sched_getaffinity(0)))
