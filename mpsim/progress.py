"""Progress bars for long commands (tqdm, on stderr, as sweeps have).

A bar shows when stderr is a terminal; `MPSIM_PROGRESS=1` forces bars on (tests, logs) and
`MPSIM_PROGRESS=0` off. A caller may also decide (`enabled`).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def progress_enabled(enabled: bool | None = None) -> bool:
    if enabled is not None:
        return enabled
    forced = os.environ.get("MPSIM_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stderr.isatty()


def progress_bar(total: int | None, desc: str, unit: str, enabled: bool | None = None) -> Any:
    """A tqdm bar on stderr (a no-op bar when disabled); use as a context manager, `.update(n)`."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                disable=not progress_enabled(enabled), mininterval=0.5)
