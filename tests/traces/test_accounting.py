"""Byte/FLOP accounting: the issue's reference figures, and properties that must hold for any shape."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.accounting import (
    causal_pairs,
    kv_bytes_per_token_head,
    launch_cost,
    padded_k,
    weight_bytes,
)
from mpsim.workload import Workload


def _decode_pass(policy: str, model: str = "vicuna-7b", batch: int = 1) -> pd.DataFrame:
    rows = synthesize(PRESETS[model], parse_policy(policy), Workload(512, 3, batch)).rows
    return rows[(rows["phase"] == "decode") & (rows["step"] == 1)]


# ap3: 2.71 GB of planes and LUTs, plus 0.33 GB since every 3-bit launch reads each row's 256-B pair
# table instead of its 16-B LUT (docs/formats.md)
@pytest.mark.parametrize(("policy", "gb"), [("fp16", 13.21), ("w4", 3.70), ("ap3", 3.04)])
def test_vicuna_decode_pass_gemm_bytes(policy: str, gb: float) -> None:
    rows = _decode_pass(policy)
    read = rows.loc[rows["op"] == "gemm", "bytes_read"].sum() / 1e9
    assert read == pytest.approx(gb, rel=0.01)


def test_kv_bits_reach_attention_rows() -> None:
    d, hd, kv_len = 32 * 32, 128, 513  # layers x heads, head_dim, cache length at decode step 1
    for policy, per_token_head in (("w4", hd * 2), ("w4+kv8", hd + 4), ("w4+kv4", hd // 2 + 4)):
        attn = _decode_pass(policy).query("op == 'attention'")
        assert (attn["k_bits"] == int(policy[-1]) if "kv" in policy else attn["k_bits"] == 16).all()
        kv_read = d * kv_len * 2 * per_token_head
        q_read = d * hd * 2
        assert attn["bytes_read"].sum() == kv_read + q_read


def test_kv_bytes_per_token_head() -> None:
    assert kv_bytes_per_token_head(128, 16) == 256
    assert kv_bytes_per_token_head(128, 8) == 132      # 8.25 bits/element, docs/sources.md#turbomind-formats
    assert kv_bytes_per_token_head(128, 4) == 68       # 4.25 bits per element


def test_group_and_anyprec_formulas() -> None:
    assert weight_bytes(4096, 4096, "int4-group", 4, 128) * 8 / (4096 * 4096) == pytest.approx(4.25)
    assert weight_bytes(11008, 4096, "anyprec", 3, None) == 11008 * 4096 * 3 // 8 + 11008 * 8 * 2
    assert weight_bytes(10, 4096, "int4-group", 4, 0) == 10 * 4096 // 2 + 10 * 4  # whole row


def test_padded_k_rounds_to_32_and_to_the_group() -> None:
    assert padded_k(70, None) == 96                                    # no groups (any-precision)
    assert [padded_k(70, g) for g in (-1, 0, 70)] == [96, 96, 96]       # whole-row groups
    assert [padded_k(70, g) for g in (32, 64, 96, 128)] == [96, 128, 96, 128]
    assert padded_k(4096, 4096) == 4096 and padded_k(4000, 128) == 4096


dims = st.integers(1, 8192)


@given(dims, dims, st.sampled_from([32, 64, 128, 0]))
def test_fewer_bits_never_read_more(n: int, k: int, g: int) -> None:
    group = [weight_bytes(n, k, f"int{b}-group", b, g) for b in (8, 4, 3, 2)]
    ap = [weight_bytes(n, k, "anyprec", b, None) for b in (8, 7, 6, 5, 4, 3, 2)]
    if k >= 512:  # below that an 8-bit row's 256-entry LUT outweighs what the codes save over fp16
        assert weight_bytes(n, k, "fp16", 16, None) >= max(group[0], ap[0])
    assert group == sorted(group, reverse=True)
    assert ap == sorted(ap, reverse=True)


@given(st.integers(1, 64), st.integers(1, 8192), st.sampled_from([16, 8, 4]),
       st.sampled_from([None, 64]))
def test_attention_bytes_linear_in_batch(batch: int, kv_len: int, bits: int, block: int | None) -> None:
    def cost(b: int) -> tuple[int, int, int]:
        c = launch_cost({"op": "attention", "kernel": "attention_decode_kernel", "batch": b, "q_len": 1,
                         "kv_len": kv_len, "num_q_heads": 32, "num_kv_heads": 8, "head_dim": 128,
                         "k_bits": bits, "v_bits": bits, "causal": True, "kv_block": block})
        return c.flops, c.bytes_read, c.bytes_written
    one, many = cost(1), cost(batch)
    assert many == tuple(batch * x for x in one)


@given(st.integers(1, 64), st.sampled_from(["fp16", "int4-group", "anyprec"]))
def test_gemm_bytes_affine_in_batch(m: int, fmt: str) -> None:
    def read(rows: int) -> int:
        row = {"op": "gemm", "kernel": "x", "m": rows, "n": 4096, "k": 4096, "w_format": fmt,
               "w_bits": 16 if fmt == "fp16" else 4, "group_size": 128, "bias": False}
        return launch_cost(row).bytes_read
    weights = read(1) - 4096 * 2  # the batch-independent part at one row
    assert weights == weight_bytes(4096, 4096, fmt, 16 if fmt == "fp16" else 4, 128)
    # from two rows the 4-bit any-precision paths read the LUT as 32-bit words (kernels/lut_words.py)
    words = 4096 * 16 * 2 if fmt == "anyprec" and m > 1 else 0
    assert read(m) == weights + words + m * 4096 * 2


@given(st.integers(1, 2048), st.integers(0, 2048))
def test_causal_pairs(q: int, extra: int) -> None:
    kv = q + extra
    assert causal_pairs(q, kv) == sum(kv - q + i + 1 for i in range(q))


def test_decode_bytes_scale_with_batch_where_they_should() -> None:
    one, eight = _decode_pass("w4", batch=1), _decode_pass("w4", batch=8)
    for op in ("attention", "kv_quant", "norm", "act", "rope"):
        a = one.loc[one["op"] == op, "bytes_read"].sum()
        b = eight.loc[eight["op"] == op, "bytes_read"].sum()
        params = 0 if op != "norm" else one.loc[one["op"] == "norm", "n"].sum() * 2
        assert b - params == 8 * (a - params), op


def _decode(batch: int, kv_len: int, kv_tokens: int | None, bits: int = 8) -> dict[str, object]:
    return {"op": "attention", "kernel": "attention_decode_kernel", "batch": batch, "q_len": 1,
            "kv_len": kv_len, "kv_tokens": kv_tokens, "num_q_heads": 32, "num_kv_heads": 32,
            "head_dim": 128, "k_bits": bits, "v_bits": bits, "causal": True, "kv_block": 16}


@given(st.integers(1, 64), st.integers(1, 4096), st.sampled_from([16, 8, 4]))
def test_decode_attention_reads_the_batch_kv_tokens(batch: int, kv_len: int, bits: int) -> None:
    """kv_tokens = batch x kv_len is the uniform batch (and what a row without the column means);
    fewer tokens read fewer bytes and do fewer FLOPs, in proportion for the KV part."""
    uniform = launch_cost(_decode(batch, kv_len, batch * kv_len, bits))
    assert uniform == launch_cost(_decode(batch, kv_len, None, bits))
    half = launch_cost(_decode(2 * batch, kv_len, batch * kv_len, bits))  # half the mean length
    full = launch_cost(_decode(2 * batch, kv_len, 2 * batch * kv_len, bits))
    assert half.flops * 2 == full.flops
    assert half.bytes_read < full.bytes_read
    assert half.bytes_written == full.bytes_written
