"""Validation prices each attention row with the kernel that ran it (adapter.attention_kernel):
by (framework, kernel_source), through TensorRT-LLM's dispatch rule, and never as another kernel."""

from __future__ import annotations

import json

import pytest

from mpsim.analysis.validation.adapter import UnrepresentableError, launch_rows
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.gpu.library import launch_kernels

H200 = load_hardware("h200-sxm")
BASE = {"op": "attention", "batch": 8, "q_len": 1, "kv_len": 1024, "heads": 32, "kv_heads": 8,
        "head_dim": 128, "kv_bits": 16, "protocol": "graph", "attn_dtype": "bfloat16"}


def _kernels(row: dict, hw: object = H200) -> list[str]:
    return [r["kernel"] for r in launch_rows(row, hw).launches]  # type: ignore[arg-type]


@pytest.mark.parametrize(("framework", "source", "extra", "kernels"), [
    ("vllm", "vllm_flash_attn_fa3", {"includes": "kv_append"}, ["fa3_decode"]),
    ("sglang", "fa3", {"includes": "kv_append"}, ["sglang_fa3_decode"]),
    ("trtllm", "torch_flow", {"includes": "rope+kv_append"}, ["trtllm_xqa_decode"]),
    ("trtllm", "torch_flow", {"includes": "rope+kv_append", "batch": 1, "kv_len": 128},
     ["trtllm_mmha_decode"]),
    ("trtllm", "torch_flow", {"includes": "rope+kv_append", "kv_heads": 32}, ["trtllm_mmha_decode"]),
    ("trtllm", "torch_flow", {"includes": "rope+kv_append", "q_len": 512, "kv_len": 512,
                              "kv_bits": 8, "attn_dtype": "fp8"}, ["trtllm_context_fmha"]),
    ("", "", {"includes": "rope+kv_append"}, ["vllm_rotary_embedding", "fa3_decode"]),
])
def test_rows_are_priced_by_the_kernel_that_ran_them(framework: str, source: str, extra: dict,
                                                     kernels: list[str]) -> None:
    row = {**BASE, **extra, "framework": framework, "kernel_source": source}
    assert _kernels(row) == kernels


def test_trtllm_fp8_cache_runs_the_hopper_gmma_kernel_with_rope_inside() -> None:
    row = {**BASE, "kv_bits": 8, "framework": "trtllm", "kernel_source": "torch_flow",
           "includes": "rope+kv_append"}
    g = launch_rows(row, H200)
    assert len(g.launches) == 1 and json.loads(g.launches[0]["config"])["gmma"] == 1


@pytest.mark.parametrize(("source", "hw", "extra", "kernels"), [
    ("vllm_flash_attn_fa2", "l40s", {}, ["fa2_decode"]),
    ("vllm_flash_attn_fa2", "l40s", {"q_len": 512, "kv_len": 512}, ["fa2_prefill"]),
    ("vllm_flashinfer_fidecode", "l40s", {"kv_bits": 8}, ["flashinfer_decode"]),
    ("vllm_flashinfer_fiprefill", "l40s", {"q_len": 512, "kv_len": 512, "kv_bits": 8},
     ["flashinfer_prefill"]),
    ("vllm_flashinfer_trtllmdecode", "b200-sxm", {}, ["flashinfer_trtllm_decode"]),
    ("vllm_flashinfer_trtllmprefill", "b200-sxm", {"q_len": 256, "kv_len": 256},
     ["flashinfer_trtllm_prefill"]),
])
def test_vllm_rows_off_hopper_are_priced_as_fa2_or_flashinfer(source: str, hw: str, extra: dict,
                                                             kernels: list[str]) -> None:
    """vLLM's kernels off Hopper (its own KV append is part of the row's kernel, `kv_append`)."""
    row = {**BASE, **extra, "framework": "vllm", "kernel_source": source, "includes": "kv_append"}
    g = launch_rows(row, load_hardware(hw))
    assert [r["kernel"] for r in g.launches] == kernels
    assert json.loads(g.launches[0]["config"])["kv_append"] == 1


def test_trtllm_on_ada_runs_its_sm89_room() -> None:
    """XQA's HMMA kernel over either cache (one CTA a KV head through an e4m3 one), MMHA by the
    dispatch rule, fmha_v2's sm_89 context kernels; on Ampere (sm_80) the bf16-cache decode only."""
    l40s = load_hardware("l40s")
    row = {**BASE, "framework": "trtllm", "kernel_source": "torch_flow", "includes": "rope+kv_append"}
    assert _kernels(row, l40s) == ["trtllm_xqa_decode"]
    assert json.loads(launch_rows(row, l40s).launches[0]["config"])["gmma"] == 0
    assert _kernels({**row, "kv_heads": 32}, l40s) == ["trtllm_mmha_decode"]
    fp8 = launch_rows({**row, "kv_bits": 8}, l40s).launches[0]
    assert fp8["kernel"] == "trtllm_xqa_decode" and json.loads(fp8["config"])["gmma"] == 0
    assert json.loads(fp8["grid"]) == [1, 8, 8]
    assert _kernels({**row, "q_len": 512, "kv_len": 512}, l40s) == ["trtllm_sm89_context_fmha"]
    a100 = load_hardware("a100-sxm-80gb")
    assert _kernels(row, a100) == ["trtllm_xqa_decode"]
    for other in ({"kv_bits": 8}, {"q_len": 512, "kv_len": 512}):
        with pytest.raises(UnrepresentableError, match=r"modelled on Ada \(sm_89\) only"):
            launch_rows({**row, **other}, a100)


@pytest.mark.parametrize(("extra", "kernels"), [
    ({}, ["trtllm_tg_decode"]),
    ({"kv_heads": 32}, ["trtllm_tg_decode"]),                 # MHA stays on trtllm-gen on sm_100
    ({"heads": 64, "kv_heads": 1}, ["trtllm_mmha_decode"]),   # above 32 query heads per KV head
    ({"q_len": 512, "kv_len": 512}, ["trtllm_tg_context"]),
    ({"q_len": 512, "kv_len": 512, "kv_bits": 8, "attn_dtype": "fp8"}, ["trtllm_tg_context"]),
])
def test_trtllm_on_blackwell_runs_its_preprocessing_then_trtllm_gen(extra: dict,
                                                                     kernels: list[str]) -> None:
    b200 = load_hardware("b200-sxm")
    row = {**BASE, **extra, "framework": "trtllm", "kernel_source": "torch_flow",
           "includes": "rope+kv_append"}
    g = launch_rows(row, b200)
    assert [r["kernel"] for r in g.launches] == kernels
    if kernels == ["trtllm_tg_context"]:  # an e4m3 cache or the FP8 FMHA: fp8 MMAs
        assert json.loads(g.launches[0]["config"])["fp8"] == int(extra.get("kv_bits") == 8)
    with pytest.raises(UnrepresentableError, match="fmha_v2"):
        launch_rows({**row, "q_len": 512, "kv_len": 512, "head_dim": 80}, b200)


@pytest.mark.parametrize(("framework", "source", "hw", "why"), [
    ("vllm", "vllm_flash_attn_fa4", "h200-sxm", "vllm_flash_attn_fa4 not modeled"),
    ("sglang", "triton", "b200-sxm", "hopper only"),
])
def test_a_kernel_mpsim_does_not_model_is_unrepresentable(framework: str, source: str, hw: str,
                                                          why: str) -> None:
    row = {**BASE, "framework": framework, "kernel_source": source, "includes": "kv_append"}
    with pytest.raises(UnrepresentableError, match=why):
        launch_rows(row, load_hardware(hw))


@pytest.mark.parametrize(("framework", "source", "hw", "kernel"), [
    ("vllm", "vllm_flash_attn_fa3", "h200-sxm", "fa3_prefill"),
    ("sglang", "fa3", "h200-sxm", "sglang_fa3_prefill"),
    ("trtllm", "torch_flow", "h200-sxm", "trtllm_context_fmha"),
    ("vllm", "vllm_flash_attn_fa2", "l40s", "fa2_prefill"),
    ("vllm", "vllm_flashinfer_trtllmprefill", "b200-sxm", "flashinfer_trtllm_prefill"),
])
def test_a_prefill_row_over_cached_tokens_is_priced_by_its_kernel(framework: str, source: str,
                                                                 hw: str, kernel: str) -> None:
    """A measured chunk after cached tokens (q_len < kv_len; none is published) is its kernel's
    prefill row with the keys of the whole cache, not unrepresentable (as it was before chunks)."""
    row = {**BASE, "q_len": 256, "kv_len": 1280, "framework": framework, "kernel_source": source,
           "includes": "kv_append"}
    main = launch_rows(row, load_hardware(hw)).launches[-1]
    assert (main["kernel"], main["q_len"], main["kv_len"]) == (kernel, 256, 1280)
    with pytest.raises(UnrepresentableError, match="kv_len >= q_len"):
        launch_rows({**row, "q_len": 1280, "kv_len": 256}, load_hardware(hw))


@pytest.mark.parametrize(("kv_bits", "kernels", "casts"), [(16, 2, 0), (8, 5, 1)])
def test_trtllm_flashinfer_rows_run_the_trtllm_gen_kernels_in_trtllms_op(kv_bits: int, kernels: int,
                                                                        casts: int) -> None:
    """TensorRT-LLM's FlashInfer backend (Gemma 4's trtllm-gen pin on Blackwell): FlashInfer's
    trtllm-gen decode after the KV append, no RoPE (outside its op), and over an fp8 cache the casts
    of K, V and Q to e4m3 first."""
    row = {**BASE, "framework": "trtllm", "kernel_source": "torch_flow_flashinfer",
           "includes": "kv_append", "kv_bits": kv_bits, "head_dim": 256}
    g = launch_rows(row, load_hardware("b200-sxm"))
    assert [r["kernel"] for r in g.launches] == ["flashinfer_trtllm_decode"]
    cfg = json.loads(g.launches[0]["config"])
    assert cfg["kv_append"] == 1 and cfg.get("qkv_cast", 0) == casts
    assert launch_kernels(g.launches[0]) == kernels
