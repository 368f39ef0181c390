"""Issue 26's policies: the fp8 / fp4 weight spellings and the fp8 KV cache (grammar, round trips,
errors), their bytes (traces/accounting.py, exact), memory and serving KV capacity, and the trace's
`kv_format` column (schema 5: written, read, and files before 5 upgraded from k_bits)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpsim.errors import MpsimInputError
from mpsim.memory import kv_cache_bytes, linear_bytes, weights_bytes
from mpsim.models import PRESETS
from mpsim.policy import GRAMMAR, WeightChoice, parse_policy
from mpsim.serve.kv import kv_bytes_per_token
from mpsim.synth import synthesize
from mpsim.traces.accounting import activation_bytes, kv_bytes_per_token_head, launch_cost, weight_bytes
from mpsim.traces.io import META_KEY, read_trace
from mpsim.traces.schema import SCHEMA_VERSION
from mpsim.workload import Workload

SPEC = PRESETS["mobilellama-1.4b"]


@pytest.mark.parametrize(("text", "weights", "kv_bits", "kv_format", "suffix"), [
    ("fp8", WeightChoice("fp8", 8, None), 16, "fp16", "kv16"),
    ("fp8grow", WeightChoice("fp8", 8, 0), 16, "fp16", "kv16"),
    ("fp8b", WeightChoice("fp8-block", 8, 128), 16, "fp16", "kv16"),
    ("nvfp4", WeightChoice("nvfp4", 4, 16), 16, "fp16", "kv16"),
    ("mxfp4", WeightChoice("mxfp4", 4, 32), 16, "fp16", "kv16"),
    ("fp8+kv8f", WeightChoice("fp8", 8, None), 8, "fp8-e4m3", "kv8f"),
    ("fp8b+kv8", WeightChoice("fp8-block", 8, 128), 8, "int8", "kv8"),
    ("nvfp4+kv4", WeightChoice("nvfp4", 4, 16), 4, "int4", "kv4"),
    ("w4+kv8f", WeightChoice("int4-group", 4, 128), 8, "fp8-e4m3", "kv8f"),
    ("fp16+kv8f", WeightChoice("fp16", 16, None), 8, "fp8-e4m3", "kv8f"),
    ("ap4-4@85-3+kv8f", WeightChoice("anyprec", 3, None), 8, "fp8-e4m3", "kv8f"),
    ("w4+kv8", WeightChoice("int4-group", 4, 128), 8, "int8", "kv8"),
])
def test_new_spellings_parse_and_round_trip(text: str, weights: WeightChoice, kv_bits: int,
                                            kv_format: str, suffix: str) -> None:
    p = parse_policy(text)
    assert p.weights_at("decode", 200) == weights and str(p) == text
    assert (p.kv_bits, p.kv_format, p.kv_suffix) == (kv_bits, kv_format, suffix)
    assert parse_policy(str(p)) == p
    if weights.w_format in ("fp8", "fp8-block", "nvfp4", "mxfp4"):  # one stored format, every pass
        assert p.family == "float" and p.weights_at("prefill", 0) == weights
        assert p.parent_bits == weights.bits


@pytest.mark.parametrize(("text", "why"), [
    ("fp8-4", "a phase-aware or progressive form needs one stored weight"),
    ("nvfp4@3-2", "a phase-aware or progressive form needs one stored weight"),
    ("fp8b-fp8", "a phase-aware or progressive form needs one stored weight"),
    ("w8-4", "a phase-aware or progressive form needs one stored weight"),
    ("fp8+kv8e", "is not a weight spelling"),
    ("fp8+kv16", "KV cache must be +kv8, +kv4 (int) or +kv8f (fp8 e4m3), got +kv16"),
    ("fp8+kv4f", "KV cache must be +kv8, +kv4 (int) or +kv8f (fp8 e4m3), got +kv4f"),
    ("fp4", "'fp4' is not a weight spelling"),
    ("fp8g128", "'fp8g128' is not a weight spelling"),
])
def test_unsupported_spellings_are_one_error_with_the_grammar(text: str, why: str) -> None:
    with pytest.raises(MpsimInputError) as err:
        parse_policy(text)
    assert why in str(err.value) and str(err.value).endswith(f"Grammar: {GRAMMAR}")


def test_the_grammar_names_every_new_spelling() -> None:
    for word in ("fp8", "fp8grow", "fp8b", "nvfp4", "mxfp4", "+kv8f", "any-precision only"):
        assert word in GRAMMAR


def test_weight_bytes_by_format_are_exact() -> None:
    n, k = 4096, 11008
    assert weight_bytes(n, k, "fp8", 8, None) == n * k + 4                      # one fp32 per tensor
    assert weight_bytes(n, k, "fp8", 8, 0) == n * k + 4 * n                     # one fp32 per row
    assert weight_bytes(n, k, "fp8-block", 8, 128) == n * k + 32 * 86 * 4       # fp32 per 128x128
    assert weight_bytes(n, k, "nvfp4", 4, 16) == n * k // 2 + n * (k // 16) + 4  # e4m3 / 16, fp32
    assert weight_bytes(n, k, "mxfp4", 4, 32) == n * k // 2 + n * (k // 32)      # e8m0 / 32
    assert weight_bytes(3, 33, "nvfp4", 4, 16) == math.ceil(99 / 2) + 3 * 3 + 4  # odd sizes round up


def test_activation_and_kv_bytes_by_format_are_exact() -> None:
    m, k = 7, 4096
    assert activation_bytes(m, k, "fp16", "fp16") == m * k * 2
    assert activation_bytes(m, k, "fp8-e4m3", "fp8") == m * k + 4 * m            # per-token fp32
    assert activation_bytes(m, k, "fp8-e4m3", "fp8-block") == m * k + 4 * m * 32  # per 1x128 group
    assert activation_bytes(m, k, "fp4-e2m1", "nvfp4") == m * k // 2 + m * 256 + 4
    assert kv_bytes_per_token_head(128, 8, "fp8-e4m3") == 128          # values only
    assert kv_bytes_per_token_head(128, 8, "int8") == kv_bytes_per_token_head(128, 8) == 132
    assert kv_bytes_per_token_head(128, 16, "fp16") == 256


def test_gemm_and_quantization_rows_cost_their_formats() -> None:
    gemm = {"op": "gemm", "m": 8, "n": 4096, "k": 4096, "w_format": "fp8", "w_bits": 8,
            "group_size": None, "a_dtype": "fp8-e4m3", "bias": False}
    cost = launch_cost(gemm)
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (
        2 * 8 * 4096 * 4096, 8 * 4096 + 8 * 4 + 4096 * 4096 + 4, 8 * 4096 * 2)
    for kernel, written in (("fp8_act_quant", 8 * 4096 + 8 * 4),
                            ("fp8_block_act_quant", 8 * 4096 + 8 * 32 * 4),
                            ("nvfp4_act_quant", 8 * 2048 + 8 * 256)):
        row = {"op": "other", "kernel": kernel, "m": 8, "n": 4096}
        c = launch_cost(row)
        assert c.bytes_written == written and c.flops == 3 * 8 * 4096
        assert c.bytes_read == 8 * 4096 * 2 + (4 if kernel == "nvfp4_act_quant" else 0)


def test_memory_counts_the_new_formats() -> None:
    n, k = 4096, 4096
    fp8, w8 = parse_policy("fp8"), parse_policy("w8")
    assert linear_bytes(n, k, fp8) == n * k + 4 < linear_bytes(n, k, w8)
    assert linear_bytes(n, k, parse_policy("nvfp4")) == n * k // 2 + n * 256 + 4
    assert linear_bytes(n, k, parse_policy("mxfp4")) == n * k // 2 + n * 128
    assert linear_bytes(n, k, parse_policy("fp8b")) == n * k + 32 * 32 * 4
    # embeddings and lm_head stay fp16: the fp8 model is the fp16 one less the decoder linears' half
    fp16 = parse_policy("fp16")
    block = SPEC.num_layers * sum(nn * kk for nn, kk, _ in SPEC.linear_shapes().values())
    assert weights_bytes(SPEC, fp16) - weights_bytes(SPEC, fp8) == block - 4 * SPEC.num_layers * len(
        SPEC.linear_shapes())
    wl = Workload(100, 28, 4)  # 4 sequences of 128 tokens; head_dim 128
    assert SPEC.head_dim == 128
    per_token_layer_head = {"fp16": 256, "w4+kv8": 132, "w4+kv8f": 128, "w4+kv4": 68}
    for text, per in per_token_layer_head.items():
        p = parse_policy(text)
        expected = 4 * 128 * SPEC.num_layers * SPEC.num_kv_heads * 2 * per
        assert kv_cache_bytes(SPEC, p, wl) == expected
        assert kv_bytes_per_token(SPEC, p.kv_bits, p.kv_format) * 4 * 128 == expected


def _as_version_4(trace_rows: object, path: Path) -> Path:
    """A file as mpsim wrote it before schema 5: no kv_format column, schema_version 4."""
    table = pa.Table.from_pandas(trace_rows.drop(columns=["kv_format", "micro_batch"]), preserve_index=False)  # type: ignore[attr-defined]
    meta = {"schema_version": 4, "source": "synth", "engine": "mpsim"}
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}), path)
    return path


def test_kv_format_round_trips_and_older_files_read_it_from_k_bits(tmp_path: Path) -> None:
    from mpsim.traces.io import write_trace

    trace = synthesize(SPEC, parse_policy("w4+kv8"), Workload(4, 3, 2))
    rows = trace.rows
    kv = rows["op"].isin(["attention", "kv_quant"])
    assert set(rows.loc[kv & (rows["phase"] == "decode"), "kv_format"]) == {"int8"}
    assert rows.loc[~kv, "kv_format"].isna().all()
    back = read_trace(write_trace(trace, tmp_path / "t.parquet"))
    assert back.rows["kv_format"].equals(rows["kv_format"])
    assert back.meta.schema_version == SCHEMA_VERSION == 6
    old = read_trace(_as_version_4(rows, tmp_path / "v4.parquet"))
    assert old.meta.schema_version == 6
    assert list(old.rows["kv_format"].astype(object).where(kv, None)) == list(
        rows["kv_format"].astype(object).where(kv, None))


def test_a_kv_format_that_disagrees_with_k_bits_is_an_error(tmp_path: Path) -> None:
    from mpsim.traces.errors import TraceError
    from mpsim.traces.io import write_trace
    from mpsim.traces.trace import Trace

    trace = synthesize(SPEC, parse_policy("w4+kv8"), Workload(4, 3, 2))
    rows = trace.rows.copy()
    rows["kv_format"] = rows["kv_format"].astype(object).replace("int8", "int4").astype("string")
    with pytest.raises(TraceError, match="column 'k_bits': 8 disagrees with kv_format 'int4'"):
        write_trace(Trace(rows, trace.meta), tmp_path / "bad.parquet")
