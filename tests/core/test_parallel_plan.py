"""Parallel plans in the trace (issue 25 point 2, mpsim/parallel.py): one rank's launches of a
tensor-parallel group with the collectives, pipeline stages, schema version 5 and the upgrade of
older files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpsim.engines import EngineChoice
from mpsim.errors import MpsimInputError
from mpsim.launch_plan import PassShape, pass_rows
from mpsim.models import PRESETS
from mpsim.parallel import ParallelPlan, stage_layers
from mpsim.policy import FP16_WEIGHTS, parse_policy
from mpsim.synth import parallel_plan, synthesize
from mpsim.traces.io import META_KEY, read_trace, write_trace
from mpsim.traces.schema import SCHEMA_VERSION
from mpsim.workload import Workload

SMALL = PRESETS["mobilellama-1.4b"]  # 24 layers, hidden 2048, FFN 5632, 16 heads, 16 KV heads
L70 = PRESETS["llama-3-70b"]  # 80 layers, hidden 8192, FFN 28672, 64 heads, 8 KV heads


def _pass(spec: object, plan: ParallelPlan, batch: int = 2, q_len: int = 16) -> list[dict[str, object]]:
    p = PassShape("prefill", 0, batch, q_len, q_len, FP16_WEIGHTS, 16, plan=plan)
    return pass_rows(spec, p)  # type: ignore[arg-type]


@pytest.mark.parametrize("tp", [2, 4])
def test_tp_layer_gemms_are_one_ranks_slices_with_two_allreduces(tp: int) -> None:
    s, tokens = SMALL, 2 * 16
    rows = _pass(s, ParallelPlan(tp))
    for layer in (0, s.num_layers - 1):
        mine = [r for r in rows if r["layer"] == layer]
        gemms = {r["module"]: (r["m"], r["n"], r["k"]) for r in mine if r["op"] == "gemm"}
        q, kv = s.num_heads // tp * s.head_dim, s.num_kv_heads // tp * s.head_dim
        assert gemms == {"qkv": (tokens, q + 2 * kv, s.hidden), "o": (tokens, s.hidden, q),
                         "gate_up": (tokens, 2 * s.ffn // tp, s.hidden),
                         "down": (tokens, s.hidden, s.ffn // tp)}
        reduces = [r for r in mine if r["op"] == "allreduce"]
        assert [r["module"] for r in reduces] == ["o_allreduce", "down_allreduce"]
        assert all(r["msg_bytes"] == tokens * s.hidden * 2 and r["tp"] == tp for r in reduces)
        order = [r["module"] for r in mine]
        assert order.index("o_allreduce") == order.index("o") + 1
        assert order.index("down_allreduce") == order.index("down") + 1
        attn = next(r for r in mine if r["op"] == "attention")
        assert (attn["num_q_heads"], attn["num_kv_heads"]) == (s.num_heads // tp, s.num_kv_heads // tp)
    assert all(r["tp"] == tp and r["stage"] == 0 for r in rows)
    # vocab-parallel embedding (an all-reduce) and lm_head (the logits all-gathered)
    embed = [r for r in rows if r["layer"] == -1 and r["op"] == "allreduce"]
    assert [r["module"] for r in embed] == ["embed_allreduce"]
    head = next(r for r in rows if r["module"] == "lm_head")
    gather = next(r for r in rows if r["op"] == "allgather")
    assert head["n"] == -(-s.vocab // tp) and gather["msg_bytes"] == 2 * head["n"] * tp * 2
    assert sum(r["op"] == "allreduce" for r in rows) == 2 * s.num_layers + 1


def test_kv_heads_are_replicated_when_fewer_than_the_group() -> None:
    rows = _pass(L70, ParallelPlan(16), batch=1, q_len=4)  # 64 / 16 = 4 query heads, 8 KV heads < 16
    attn = next(r for r in rows if r["op"] == "attention")
    qkv = next(r for r in rows if r["module"] == "qkv")
    assert (attn["num_q_heads"], attn["num_kv_heads"]) == (4, 1)
    assert qkv["n"] == (4 + 2 * 1) * 128 and qkv["k"] == 8192


def test_plans_the_model_cannot_take_are_one_clear_error() -> None:
    with pytest.raises(MpsimInputError, match=r"--tp 3 does not divide the 64 query heads of llama-3-70b"):
        parallel_plan(L70, "mpsim", tp=3)
    odd = replace(SMALL, name="odd", num_heads=12, num_kv_heads=3)
    with pytest.raises(MpsimInputError, match=r"--tp 2 and the 3 KV heads of odd"):
        parallel_plan(odd, "mpsim", tp=2)
    with pytest.raises(MpsimInputError, match=r"--pp 30: mobilellama-1.4b has only 24 layers"):
        parallel_plan(SMALL, "mpsim", pp=30)
    with pytest.raises(MpsimInputError, match=r"--tp 0"):
        ParallelPlan(0)


def test_pp_splits_layers_as_vllm_and_sends_between_stages() -> None:
    assert stage_layers(80, 3) == [27, 27, 26] and stage_layers(24, 4) == [6] * 4
    assert stage_layers(10, 4) == [2, 3, 3, 2]
    rows = _pass(SMALL, ParallelPlan(2, 4), batch=2, q_len=8)
    sends = [r for r in rows if r["op"] == "sendrecv"]
    assert [(r["layer"], r["stage"]) for r in sends] == [(5, 0), (11, 1), (17, 2)]
    assert all(r["msg_bytes"] == 16 * SMALL.hidden * 2 for r in sends)
    by_layer = {r["layer"]: r["stage"] for r in rows if r["layer"] >= 0 and r["op"] == "gemm"}
    assert [by_layer[i] for i in (0, 5, 6, 23)] == [0, 0, 1, 3]
    assert next(r for r in rows if r["module"] == "embed")["stage"] == 0
    assert {r["stage"] for r in rows if r["layer"] == -1 and r["module"] != "embed"
            and r["module"] != "embed_allreduce"} == {3}


def test_engines_name_their_allreduce_library() -> None:
    wl = Workload(8, 2, 1)
    kernels = {e: set(synthesize(SMALL, parse_policy("w4"), wl, tp=2, engine=EngineChoice(e, "hopper"))
                      .rows.query("op == 'allreduce'")["kernel"].astype(str))
               for e in ("mpsim", "vllm", "trtllm")}
    assert kernels == {"mpsim": {"nccl_allreduce"}, "vllm": {"vllm_custom_allreduce"},
                       "trtllm": {"trtllm_custom_allreduce"}}


def test_schema_5_round_trip_and_version_4_upgrade(tmp_path: Path) -> None:
    trace = synthesize(SMALL, parse_policy("w4+kv8"), Workload(8, 3, 1), tp=2, pp=2)
    assert trace.meta.environment["parallel"]["tp"] == 2
    back = read_trace(write_trace(trace, tmp_path / "tp2.parquet"))
    pd.testing.assert_frame_equal(back.rows, trace.rows)
    assert back.meta == trace.meta and back.meta.schema_version == SCHEMA_VERSION == 6
    # a version-4 file: no parallel columns; read as one GPU, one stage, no collectives
    one = synthesize(SMALL, parse_policy("w4"), Workload(8, 2, 1)).rows
    old = one.drop(columns=["tp", "stage", "msg_bytes", "comm_library", "micro_batch"])
    table = pa.Table.from_pandas(old, preserve_index=False).replace_schema_metadata(
        {META_KEY: json.dumps({"schema_version": 4, "source": "synth", "engine": "mpsim"}).encode()})
    pq.write_table(table, tmp_path / "v4.parquet")
    upgraded = read_trace(tmp_path / "v4.parquet")
    assert upgraded.meta.schema_version == 6
    assert (upgraded.rows["tp"] == 1).all() and (upgraded.rows["stage"] == 0).all()
    assert upgraded.rows["msg_bytes"].isna().all() and upgraded.rows["comm_library"].isna().all()
    pd.testing.assert_frame_equal(upgraded.rows, one)
