"""traces.cells.plain: NA in every spelling -> None, numpy scalars -> Python, the rest unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mpsim.traces.cells import plain


@pytest.mark.parametrize("na", [None, pd.NA, float("nan"), np.float64("nan"), np.float32("nan")])
def test_every_na_is_none(na: object) -> None:
    assert plain(na) is None


@pytest.mark.parametrize(("value", "expected"), [
    (np.int32(7), 7), (np.float16(0.5), 0.5), (np.bool_(True), True), ("w4", "w4"), (3, 3), (1.25, 1.25),
])
def test_numpy_scalars_become_python(value: object, expected: object) -> None:
    out = plain(value)
    assert out == expected and type(out) is type(expected)


def test_a_frame_cell_round_trips() -> None:
    frame = pd.DataFrame({"m": pd.array([1, None], dtype="Int64"),
                          "k": pd.array(["a", None], dtype="string")})
    assert [plain(v) for v in frame["m"]] == [1, None]
    assert [plain(v) for v in frame["k"]] == ["a", None]
