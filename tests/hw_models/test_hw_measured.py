"""The hardware files against the published measurements (mpsim.analysis.validation.hw_peaks):
L40S's L2 size from decode attention, B200's peaks against every GEMM row. Checks, not fits."""

from __future__ import annotations

import math

import pytest
from groundtruth_cases import GROUNDTRUTH, needs_groundtruth

from mpsim.analysis.validation.hw_peaks import (
    decode_kv_bandwidth,
    gemm_peak_fractions,
    l2_bracket,
    main,
)
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec

MIB = 2**20


@needs_groundtruth
def test_l40s_decode_attention_brackets_its_l2_size() -> None:
    # A 64 MiB bf16 KV cache runs at about 2x the 864 GB/s GDDR6 peak (it is re-read from L2), a
    # 128 MiB one at about 0.7x (it streams from DRAM): the file's L2 lies between where the rows stop
    # running above the peak and where none do, on both stacks.
    table = decode_kv_bandwidth(GROUNDTRUTH, "l40s")
    bf16 = table[table["kv_dtype"] == "bfloat16"].set_index(["framework", "kv_bytes"])
    for fw in ("vllm", "trtllm"):
        assert 1.8 <= bf16.loc[(fw, 64 * MIB), "median"] <= 2.1
        assert 0.70 <= bf16.loc[(fw, 128 * MIB), "median"] <= 0.75
        lo, hi = l2_bracket(table, fw)
        assert (lo, hi) == (96 * MIB, 128 * MIB)
        spec = load_hardware("l40s")
        assert isinstance(spec, GpuSpec)
        assert lo <= spec.l2.size_MiB * MIB < hi, (fw, spec.l2.size_MiB)


@needs_groundtruth
def test_no_b200_gemm_row_beats_the_b200_files_peaks() -> None:
    got = gemm_peak_fractions(GROUNDTRUTH, "b200-sxm")
    assert set(got["dtype"]) == {"bfloat16", "fp8", "fp8_block", "nvfp4"}
    assert set(got["framework"]) == {"vllm", "trtllm"}
    assert (got["rows"] > 29000).all() and (got["stream_rows"] > 2000).all()
    assert (got["max_flop_frac"] < 1.0).all() and (got["max_stream_frac"] < 1.0).all()
    # the closest rows: cuBLAS bf16 at 93% of 2.25 PFLOP/s, weights streamed at 90% of 8 TB/s
    assert got["max_flop_frac"].max() == pytest.approx(0.934, abs=0.001)
    assert got["max_stream_frac"].max() == pytest.approx(0.895, abs=0.001)
    assert not any(math.isnan(x) for x in got["max_stream_frac"])


@needs_groundtruth
def test_hw_peaks_report_states_both_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(GROUNDTRUTH)]) == 0
    out = capsys.readouterr().out
    assert "L2 in [96, 128) MiB; l40s.yaml says 96 MiB" in out
    assert "b200-sxm.yaml's peaks" in out and "nvfp4" in out
