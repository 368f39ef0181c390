"""A trace cell as plain Python: what row builders, JSON writers and Chrome events take.

NA (None, pandas.NA, NaN) becomes None and numpy scalars their Python values; anything else is
returned as it is. The one helper the simulator's key rows, the Chrome timeline and the engine
repricer share.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def plain(value: Any) -> Any:
    """`value` as a JSON-ready Python value: None for NA, Python numbers for numpy scalars."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "item"):
        value = value.item()  # numpy scalar -> Python (a NaN one is NA too)
        if isinstance(value, float) and value != value:
            return None
    return value
