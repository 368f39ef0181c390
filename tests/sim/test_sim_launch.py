"""One launch priced alone (`mpsim op`: mpsim.sim.launch.price_launch, plain Python) gives the
numbers `simulate` gives the same launch as a one-row trace, under both performance models."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.sim import simulate
from mpsim.sim.launch import price_launch
from mpsim.sim.result import LAUNCH_COLUMNS
from mpsim.sim.roofline import launch_roofline, roofline
from mpsim.traces.trace import rows_to_frame

ROWS = {
    "gemv-w4": gemm_row(1, 11008, 4096, "group", 4),
    "gemm-fp16": gemm_row(512, 4096, 4096),
    "gemm-ap3-bias": gemm_row(16, 4096, 11008, "anyprec", 3, bias=True),
    "decode-attn-kv4": attention_row(2, 1, 3000, 32, 8, 128, 4),
    "prefill-attn": attention_row(1, 256, 256, 32, 32, 128),
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(a == b) if isinstance(a, str | bool) else a == pytest.approx(b, rel=1e-12, abs=0)


@pytest.mark.parametrize("hw_name", ["h200-sxm", "npu-llm"])
@pytest.mark.parametrize("model", ["sim", "roofline"])
@pytest.mark.parametrize("case", sorted(ROWS))
def test_price_launch_is_simulate_of_one_row(case: str, model: str, hw_name: str) -> None:
    hw, row = load_hardware(hw_name), ROWS[case]
    if hw.kind == "npu" and model == "sim":  # the NPU step model prices steps: simulate says so
        with pytest.raises(MpsimInputError, match="prices whole steps"):
            price_launch(row, hw, model)
        return
    want = simulate(rows_to_frame([row]), hw, model, cache_dir=None).launches.iloc[0]
    got = price_launch(row, hw, model)
    assert list(got) == list(LAUNCH_COLUMNS)
    plain = {c: want[c].item() if hasattr(want[c], "item") else want[c] for c in LAUNCH_COLUMNS}
    wrong = {c: (got[c], plain[c]) for c in LAUNCH_COLUMNS if not _same(got[c], plain[c])}
    assert not wrong


def test_launch_roofline_is_roofline_of_one_row() -> None:
    hw = load_hardware("h100-sxm")
    for row in ROWS.values():
        want = roofline(rows_to_frame([row]), hw).iloc[0]
        got = launch_roofline(row, hw)
        assert got["bound"] == want["bound"]
        for c in ("t_math_s", "t_mem_s", "t_lower_s"):
            assert got[c] == pytest.approx(float(want[c]), rel=1e-15)
