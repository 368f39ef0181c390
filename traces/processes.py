"""Whether a process is still there: the owner of a sweep's lock, or of a temporary output folder
left by a run that died (mpsim.traces.atomic_folder, mpsim.analysis.sweep.lock)."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (killed, not yet reaped by its parent) is gone for our purpose.
    A process of another user (PermissionError) counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
