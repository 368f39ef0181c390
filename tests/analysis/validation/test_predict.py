"""From measured rows to predictions: launches per row, protocol costs, isolation, the rows file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.adapter import launch_rows
from mpsim.analysis.validation.against import OUT_COLUMNS, validate_against
from mpsim.analysis.validation.measured import read_generic_csv
from mpsim.analysis.validation.predict import predict_rows
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.protocols import get_protocol

HW = load_hardware("h200-sxm")
HEADER = ("op,m,n,k,w_format,w_bits,group_size,batch,q_len,kv_len,heads,kv_heads,head_dim,kv_bits,"
          "tokens,hidden,measured_us,protocol,includes")


def _rows(tmp_path: Path, *lines: str) -> pd.DataFrame:
    path = tmp_path / "m.csv"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return read_generic_csv(path).rows


def test_scope_adds_launches_in_framework_order() -> None:
    base = {"op": "attention", "batch": 2, "q_len": 1, "kv_len": 300, "heads": 32, "kv_heads": 8,
            "head_dim": 128, "kv_bits": 16, "protocol": "graph"}
    bare = launch_rows({**base, "includes": ""}, HW).launches
    assert [(r["op"], r["kernel"]) for r in bare] == [("attention", "fa3_decode")]
    assert json.loads(bare[0]["config"])["kv_append"] == 0
    g = launch_rows({**base, "includes": "rope+kv_append"}, HW)
    assert [r["kernel"] for r in g.launches] == ["vllm_rotary_embedding", "fa3_decode"] and g.main == 1
    assert json.loads(g.launches[1]["config"])["kv_append"] == 1
    # a 4-bit cache has no published kernel: mpsim's decode kernel, its append a launch of its own
    g4 = launch_rows({**base, "kv_bits": 4, "includes": "kv_append"}, HW)
    assert [r["op"] for r in g4.launches] == ["kv_quant", "attention"] and g4.main == 1


def test_published_kernels_by_row() -> None:
    gemm = {"op": "gemm", "m": 64, "n": 4096, "k": 4096, "w_format": "fp16", "w_bits": 16,
            "group_size": None}
    best = launch_rows(gemm, HW).launches[0]
    heur = launch_rows(gemm, HW, "heuristic").launches[0]
    assert best["kernel"] == heur["kernel"] == "cublas_gemm"
    wo = {**gemm, "m": 2, "w_format": "int4-group", "w_bits": 4, "group_size": 4096}
    assert launch_rows(wo, HW).launches[0]["kernel"] == "trtllm_wo_gemv"
    grouped = {**wo, "group_size": 128}
    assert launch_rows(grouped, HW).launches[0]["kernel"].startswith("gemv_")
    norm = {"op": "rmsnorm", "tokens": 8, "hidden": 4096}
    assert launch_rows(norm, HW).launches[0]["kernel"] == "vllm_rms_norm"
    add = {"op": "add", "tokens": 8, "hidden": 4096}
    assert "l2_warm" not in launch_rows(add, HW).launches[0]["config"]
    assert '"l2_warm": 1' in launch_rows({**add, "in_forward": True}, HW).launches[0]["config"]


def test_protocol_cost_and_launch_count(tmp_path: Path) -> None:
    rows = _rows(tmp_path, "gemm,1,4096,4096,,,,,,,,,,,,,10,kernel,",
                 "gemm,1,4096,4096,,,,,,,,,,,,,10,eager,",
                 "attention,,,,,,,4,1,512,32,8,128,,,,15,graph,kv_append")
    p = predict_rows(rows, HW, cache_dir=None)
    eager = get_protocol("eager")
    assert p.predicted_us[1] - p.predicted_us[0] == pytest.approx(eager.per_call_us, rel=1e-9)
    assert p.roofline_us[1] - p.roofline_us[0] == pytest.approx(eager.per_call_us, rel=1e-9)
    assert list(p.launches) == [1, 1, 2] and (p.status == "ok").all()  # FA3 + its KV append
    assert p.kernel_us[2] > 0 and '"kernel":"fa3_decode"' in p.config[2]
    graph = get_protocol("graph")
    assert p.predicted_us[2] - p.kernel_us[2] == pytest.approx(2 * graph.per_launch_us, rel=1e-9)


def test_rows_are_predicted_cold_whatever_their_neighbours(tmp_path: Path) -> None:
    big = "gemm,4096,4096,4096,,,,,,,,,,,,,900,graph,"
    small = "silu_mul,,,,,,,,,,,,,,4096,2048,20,graph,"
    alone = predict_rows(_rows(tmp_path, small), HW, cache_dir=None).predicted_us[0]
    after = predict_rows(_rows(tmp_path, big, small), HW, cache_dir=None).predicted_us[1]
    assert after == pytest.approx(alone, rel=1e-12)


def test_rows_table_keeps_input_columns_then_the_five(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(HEADER + ",who\n" + "gemm,16,64,64,fp8,,,,,,,,,,,,3.0,graph,,me\n"
                    + "gemm,16,64,64,,,,,,,,,,,,,3.0,graph,,you\n")
    r = validate_against(read_generic_csv(path), HW, cache_dir=None)
    table = r.rows_table
    assert list(table.columns) == [*HEADER.split(","), "who", *OUT_COLUMNS]
    assert table.loc[0, "status"].startswith("unrepresentable") and np.isnan(table.loc[0, "predicted_us"])
    assert table.loc[1, "status"] == "ok"
    assert table.loc[1, "error"] == pytest.approx((table.loc[1, "predicted_us"] - 3.0) / 3.0)
    assert r.unpredicted["rows"].sum() == 1
