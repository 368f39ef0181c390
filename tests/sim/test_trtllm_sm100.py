"""TensorRT-LLM's attention op on Blackwell (mpsim/library/trtllm_sm100.py: the dispatch rule and
configs; mpsim/sim/gpu/library/trtllm_sm100.py: its QKV preprocessing, then the trtllm-gen kernel
priced by the flashinfer_trtllm room's work model with TensorRT-LLM's own op cost)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row
from mpsim.library.trtllm_sm100 import TRTLLM_TG_CONTEXT, TRTLLM_TG_DECODE
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.gpu.work import LaunchWork
from mpsim.sim.launch import simulate_launch
from mpsim.sim.params import DEFAULT_PARAMS

B200: GpuSpec = load_hardware("b200-sxm")  # type: ignore[assignment]
SMS = 148


def _us(row: dict, params=DEFAULT_PARAMS) -> float:  # type: ignore[no-untyped-def]
    return simulate_launch(row, B200, params).time_s * 1e6


def work_of(row: dict) -> LaunchWork:  # type: ignore[type-arg]
    return launch_work(row, gpu_rates(B200, DEFAULT_PARAMS), DEFAULT_PARAMS, 0.0)


def test_rows_name_the_sm100_kernels_and_stand_for_their_launches() -> None:
    dec = attention_row(8, 1, 4096, 32, 8, 128, 16, kernel="trtllm_sm100", sms=SMS)
    ctx = attention_row(2, 1024, 1024, 32, 8, 128, 8, kernel="trtllm_sm100", sms=SMS)
    assert (dec["kernel"], ctx["kernel"]) == (TRTLLM_TG_DECODE, TRTLLM_TG_CONTEXT)
    assert launch_kernels(dec) == 3   # build decoder info, the preprocessing, then trtllm-gen
    assert launch_kernels(ctx) == 2   # the preprocessing kernel first
    assert json.loads(ctx["config"])["fp8"] == 1              # an e4m3 cache: fp8 Q, K, V
    assert ctx["kv_format"] == "fp8-e4m3"
    mmha = attention_row(8, 1, 4096, 64, 1, 128, 16, kernel="trtllm_sm100", sms=SMS)
    assert mmha["kernel"] == "trtllm_mmha_decode"
    with pytest.raises(MpsimInputError, match="fmha_v2"):
        attention_row(2, 512, 512, 32, 8, 80, 16, kernel="trtllm_sm100", sms=SMS)
    with pytest.raises(MpsimInputError, match="16-bit or fp8"):
        attention_row(8, 1, 4096, 32, 8, 128, 4, kernel="trtllm_sm100", sms=SMS)


def test_the_op_costs_trtllm_scope_and_preprocessing_on_top_of_the_trtllm_gen_kernel() -> None:
    """The same shape as vLLM's trtllm-gen row: TRT-LLM's generation op adds its build-decoder-info
    and preprocessing kernels and its own op cost instead of vLLM's; with the op costs equal and the
    preprocessing's round free, what is left over vLLM's price is those two kernels' floors and
    launch gaps (under 3 us each)."""
    args = (8, 1, 4096, 32, 8, 128, 16)
    ours = attention_row(*args, kernel="trtllm_sm100", sms=SMS)
    vllm = attention_row(*args, kernel="flashinfer_trtllm", sms=SMS)
    p = DEFAULT_PARAMS
    same = replace(p, trtllm=replace(p.trtllm, xqa_scope_us=p.flashinfer.tg_decode_scope_us,
                                     prep_round_ns=0.0))
    free_prep = _us(ours, same)
    assert 3.0 < free_prep - _us(vllm) < 6.0
    assert _us(ours) > free_prep  # the preprocessing and TRT-LLM's op cost are priced


def test_the_generation_op_builds_its_decoder_info_first() -> None:
    """TensorRT-LLM's XqaDispatcher on sm_100 always runs invokeBuildDecoderInfo before the
    preprocessing ("always needed as cu_kv_seq_lens is needed by trtllm-gen kernels"): a kernel of
    no work beyond the batch's lengths, so it adds its launch and nothing that grows."""
    parts = [p.work.name for p in work_of(attention_row(8, 1, 4096, 32, 8, 128, 16, kernel="trtllm_sm100",
                                                            sms=SMS))]
    assert parts[:2] == ["trtllm build decoder info", "trtllm qkv preprocessing"]
    ctx = [p.work.name for p in work_of(attention_row(2, 1024, 1024, 32, 8, 128, 8, kernel="trtllm_sm100",
                                                         sms=SMS))]
    assert "trtllm build decoder info" not in ctx  # the context op's fitted scope holds its own
    short, long = (_us(attention_row(64, 1, n, 32, 8, 128, 16, kernel="trtllm_sm100", sms=SMS))
                   for n in (64, 65536))
    assert long > 10 * short


def test_an_fp8_cache_decode_reads_half_the_bytes() -> None:
    bf16 = _us(attention_row(32, 1, 32768, 32, 8, 128, 16, kernel="trtllm_sm100", sms=SMS))
    fp8 = _us(attention_row(32, 1, 32768, 32, 8, 128, 8, kernel="trtllm_sm100", sms=SMS))
    assert 0.45 < fp8 / bf16 < 0.75


GROUNDTRUTH = Path(__file__).resolve().parents[2] / ".." / "shared" / "groundtruth" / "aiconfigurator"


@pytest.mark.skipif(not GROUNDTRUTH.is_dir(), reason="../shared/groundtruth is not here")
def test_b200_trtllm_decode_rows_priced_out_of_sample() -> None:
    """No constant was set from these rows (the kernel's from B200 vLLM rows, the op's from H200
    TRT-LLM rows); the full figures are docs/validation.md's (`analysis.validation.stacks`)."""
    from mpsim.analysis.validation.against import validate_against
    from mpsim.analysis.validation.sources import read_measurements

    path = (GROUNDTRUTH / "b200_sxm" / "attention" / "trtllm" / "1.3.0rc20"
            / "generation_attention_perf.parquet")
    r = validate_against(read_measurements(path), B200, selection="stacks", sample=120, cache_dir=None)
    f = r.frame[r.frame["status"] == "ok"]
    assert len(f) >= 60
    sim = float((f["predicted_us"] / f["measured_us"] - 1).abs().mean())
    roof = float((f["roofline_us"] / f["measured_us"] - 1).abs().mean())
    assert sim <= 0.16 and sim < roof / 3, (sim, roof)


def test_the_context_call_gives_each_query_head_its_ctas() -> None:
    """TensorRT-LLM's context call does not pack the query group into a tile (packed QKV: no
    `mGroupsHeadsQ`): a one-token prompt of 64 query heads costs the same over 1 or 8 KV heads, and
    runs the context kernel; vLLM's packed call grows with the KV heads instead."""
    ours = [attention_row(256, 1, 1, 64, hk, 128, 16, kernel="trtllm_sm100", sms=SMS) for hk in (1, 8)]
    cfgs = [json.loads(r["config"]) for r in ours]
    assert [c["pack_gqa"] for c in cfgs] == [0, 0]
    assert cfgs[0]["block_m"] == cfgs[1]["block_m"] == 128
    assert json.loads(ours[0]["grid"]) == json.loads(ours[1]["grid"]) == [1, 256 * 64]
    one, eight = (_us(r) for r in ours)
    assert abs(eight - one) / one < 0.05
    vllm = [attention_row(256, 8, 8, 64, hk, 128, 16, kernel="flashinfer_trtllm", sms=SMS)
            for hk in (1, 8)]
    assert [json.loads(r["config"])["pack_gqa"] for r in vllm] == [1, 1]
    assert _us(vllm[1]) > 1.5 * _us(vllm[0])
