"""What the launch-config keys of mpsim's kernels share: reading a key from a config, and the
MPSIM_* environment switch that drops one (kernels/loop_stages.py, sz_words.py, lut_words.py).
No triton import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping


def env_switch(name: str) -> bool:
    """An on/off environment switch: '1' or unset is on, '0' off, anything else one error naming it."""
    value = os.environ.get(name, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{name}={value!r}: expected '0' or '1'")
    return value == "1"


def key_of(extra: Iterable[tuple[str, int]] | Mapping[str, int], key: str) -> int:
    """A config's integer setting `key` (from its `extra` pairs or its config dict; 0 without it)."""
    items = dict(extra.items() if isinstance(extra, Mapping) else extra)
    return int(items.get(key, 0))
