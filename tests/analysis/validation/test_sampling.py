"""The stratified sample of a measured table: deterministic, proportional, capped, stated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.measured import Measurements
from mpsim.analysis.validation.sampling import (
    MIN_PER_STRATUM,
    allocate,
    strata,
    stratified_sample,
)
from mpsim.analysis.validation.selections import apply_selection
from mpsim.analysis.validation.sources import read_aic_attention, read_aic_gemm
from mpsim.cli import main
from mpsim.errors import MpsimInputError


def _gemm_table(groups: list[tuple[str, str, int, int]]) -> pd.DataFrame:
    """(gemm_dtype, kernel_source, m, rows) groups of an aiconfigurator gemm_perf table."""
    parts = []
    for dtype, source, m, n_rows in groups:
        n = 64 * (1 + np.arange(n_rows))
        parts.append(pd.DataFrame({"framework": "vllm", "version": "0.24.0", "device": "NVIDIA H200",
                                   "op_name": "gemm", "kernel_source": source, "gemm_dtype": dtype,
                                   "m": m, "n": n, "k": 4096, "latency": 0.01 + n * 1e-6}))
    return pd.concat(parts, ignore_index=True)


TORCH_LINEAR = "torch.nn.functional.linear"  # vLLM 0.24's bf16 rows (cuBLAS)
# four strata of 600, 300, 98 and 2 rows (class x M band x dtype x kernel_source)
GROUPS = [("bfloat16", TORCH_LINEAR, 1, 600), ("bfloat16", TORCH_LINEAR, 64, 300),
          ("bfloat16", "other", 64, 98), ("int4_wo", "trt", 1, 2)]


def _measurements() -> Measurements:
    return read_aic_gemm(_gemm_table(GROUPS))


def test_allocation_is_proportional_with_a_floor_per_stratum() -> None:
    # base 3,3,3,2; the other 89 rows in proportion to 597, 297, 95, 0 (largest remainders)
    assert allocate(np.array([600, 300, 98, 2]), 100).tolist() == [57, 30, 11, 2]
    assert allocate(np.array([5, 4]), 100).tolist() == [5, 4]           # everything fits: all
    assert allocate(np.array([5, 4, 3, 2, 1]), 3).tolist() == [1, 1, 1, 0, 0]  # fewer rows than strata
    assert allocate(np.array([1000, 1000]), 7).sum() == 7


def test_sample_is_capped_stratified_and_deterministic() -> None:
    m = _measurements()
    a, b = stratified_sample(m, 100), stratified_sample(m, 100)
    kept = ~a.rows["status"].str.startswith("skipped")
    assert int(kept.sum()) == 100
    assert a.rows["status"].tolist() == b.rows["status"].tolist()  # same rows every run
    per = pd.Series(strata(m)[kept.to_numpy()]).value_counts().sort_values(ascending=False)
    assert per.tolist() == [57, 30, 11, 2]
    assert set(a.rows["status"][~kept]) == {"skipped: outside sample 100"}
    assert a.notes[-1].startswith("sample 100: 100 of 1000 selected rows") and "4 strata" in a.notes[-1]
    other = stratified_sample(m, 100, seed=1)
    assert other.rows["status"].tolist() != a.rows["status"].tolist()  # the seed decides which rows
    assert min(per) >= min(MIN_PER_STRATUM, 2)


def test_sample_draws_only_from_the_selection() -> None:
    d = _gemm_table([("bfloat16", TORCH_LINEAR, 1, 50), ("sq", "cutlass", 1, 50)])
    m = apply_selection(read_aic_gemm(d), "stacks")  # SmoothQuant W8A8 is not a class of the report
    s = stratified_sample(m, 10)
    assert (s.rows["status"].iloc[50:] == "skipped: outside selection stacks").all()
    assert (~s.rows["status"].iloc[:50].str.startswith("skipped")).sum() == 10
    assert stratified_sample(m, 80).rows["status"].iloc[:50].eq("ok").all()  # under the cap: all
    with pytest.raises(MpsimInputError, match="--sample 0"):
        stratified_sample(m, 0)


def test_validate_cli_sample_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "gemm_perf.parquet"
    _gemm_table([("bfloat16", TORCH_LINEAR, 1, 12), ("bfloat16", TORCH_LINEAR, 64, 12)]).to_parquet(table)
    out = tmp_path / "rows.csv"
    assert main(["validate", "--against", str(table), "--hw", "h200-sxm", "--sample", "6",
                 "--out", str(out), "--cache-dir", str(tmp_path / "memo")]) == 0
    rows = pd.read_csv(out)
    assert (rows["status"] == "ok").sum() == 6
    assert (rows["status"] == "skipped: outside sample 6").sum() == 18
    assert "sample 6: 6 of 24 selected rows" in capsys.readouterr().out
    assert main(["validate", "--against", str(table), "--hw", "h200-sxm", "--sample", "0"]) == 2
    assert main(["validate", "x.parquet", "--hw", "h200-sxm", "--sample", "3"]) == 2
    assert "--sample" in capsys.readouterr().err


def test_stacks_selection_keeps_every_attention_row_and_leaves_issue11_alone() -> None:
    ops = ["generation_attention"] * 3 + ["context_attention"] * 3
    d = pd.DataFrame({"framework": "trtllm", "op_name": ops,
                      "kernel_source": "torch_flow", "batch_size": 4, "isl": [1, 1, 1, 256, 256, 256],
                      "num_heads": 32, "num_key_value_heads": [8, 4, 8, 8, 8, 8], "head_dim": 128,
                      "window_size": [0, 0, 128, 0, 0, 0], "beam_width": 1,
                      "attn_dtype": ["bfloat16"] * 5 + ["fp8"],
                      "kv_cache_dtype": ["fp8", "bfloat16", "bfloat16", "fp8", "bfloat16", "fp8"],
                      "step": [1023, 1023, 1023, 0, 0, 0], "latency": 0.02})
    m = read_aic_attention(d)
    stacks = apply_selection(m, "stacks").rows["status"].tolist()
    assert [s.startswith("skipped") for s in stacks] == [False] * 6  # fp8 compute: its own class
    assert read_aic_attention(d).rows["cls"].tolist()[-1] == "attention prefill fp8"
    # the sliding window travels to the adapter; TRT-LLM's fp8-KV prefill runs its fp8 FMHA (priced)
    assert stacks[2] == "ok" and int(m.rows["window"].iloc[2]) == 128 and stacks[3] == "ok"
    issue11 = apply_selection(m, "issue11").rows["status"].str.startswith("skipped").tolist()
    assert issue11 == [False, True, True, True, False, True]  # 32/8 heads only, bf16 prefill only


def test_a_larger_sample_keeps_the_rows_of_a_smaller_one() -> None:
    m = _measurements()
    small, large = (~stratified_sample(m, n).rows["status"].str.startswith("skipped") for n in (60, 200))
    assert (small & ~large).sum() == 0 and large.sum() == 200
