"""The NPU note's tables: the analytic bounds and the doc filler (the simulated bars: tests/sim)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.bench.npu import decode_costs, fill, markdown, padding_efficiency, trace_of
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import NpuSpec
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.traces.trace import rows_to_frame
from mpsim.workload import Workload


def test_padding_efficiency_is_m_and_n_over_whole_tiles() -> None:
    rows = rows_to_frame([gemm_row(512, 4096, 4096), gemm_row(100, 200, 4096),
                          attention_row(1, 512, 512, 32, 8, 128), gemm_row(1, 4096, 4096)])
    eff = padding_efficiency(rows, 128, 128)
    assert eff[0] == 1.0
    assert eff[1] == pytest.approx(100 / 128 * 200 / 256)
    assert eff[2] == pytest.approx(1.0)  # 4 queries per KV head x 512 = 2048 rows, 512 keys
    assert eff[3] == pytest.approx(1 / 128)


def test_decode_costs_are_small_and_positive() -> None:
    hw = load_hardware("npu-llm")
    assert isinstance(hw, NpuSpec)
    costs = decode_costs(trace_of("w4", Workload(60, 6, 1)).rows, hw)
    assert set(costs) == {"writes_s", "gather_s", "kv_padding_s", "tail_s"}
    assert all(0 <= v < 1e-4 for v in costs.values())
    assert costs["kv_padding_s"] > 0  # kv 61..65 rounds up to 64 and 128


def test_fill_replaces_only_its_block(tmp_path: Path) -> None:
    doc = tmp_path / "note.md"
    doc.write_text("a\n<!-- npu:x:begin -->\nold\n<!-- npu:x:end -->\nb\n")
    table = pd.DataFrame({"policy": ["w4"], "ratio": [1.0123456]})
    fill(doc, "x", markdown(table))
    text = doc.read_text()
    assert text.startswith("a\n") and text.endswith("b\n") and "old" not in text
    assert "| w4 | 1.012 |" in text
    with pytest.raises(ValueError, match="no <!-- npu:y:begin -->"):
        fill(doc, "y", "")
