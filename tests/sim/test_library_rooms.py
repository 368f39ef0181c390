"""The kernel library rooms (issue 23 point 1): one dispatch table per floor, the same kernels on
both, and a loud error for a kernel or library nobody owns (mpsim/library/, mpsim/sim/gpu/library/)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mpsim import library
from mpsim.errors import MpsimInputError
from mpsim.launch_plan import attention_row, framework_op_row, gemm_row
from mpsim.sim.gpu import library as work_library
from mpsim.sim.gpu.library import mpsim as mpsim_room
from mpsim.sim.params import (
    DEFAULT_PARAMS,
    LEGACY_NAMES,
    LIBRARY_FIELDS,
    float_param_names,
    get_param,
    with_params,
)


def test_every_kernel_of_a_library_has_a_work_model_and_no_other() -> None:
    assert set(library.OWNER) == set(work_library.WORK)
    assert set(library.EXTERNAL_KERNELS) == set(work_library.EXTERNAL)
    assert set(library.MPSIM.kernels) == set(mpsim_room.WORK)
    for name, lib in library.LIBRARIES.items():
        assert lib.name == name and lib.kernels, name
        assert set(lib.kernels) == set(work_library.ROOMS[name]), name


def test_an_unknown_kernel_or_library_names_the_known_ones() -> None:
    with pytest.raises(MpsimInputError, match=r"unknown kernel 'nope'.*cublas_gemm"):
        library.library_of("nope")
    with pytest.raises(MpsimInputError, match=r"unknown kernel library 'nope'.*'cublas'"):
        library.get_library("nope")
    with pytest.raises(ValueError, match=r"no work model for kernel 'nope'.*fa3_decode"):
        work_library.work_for("nope")
    assert library.library_of("fa3_prefill").name == "fa3"
    assert library.library_of("rms_norm_kernel").name == "mpsim"


def test_the_row_builders_dispatch_through_the_table_and_fail_loudly() -> None:
    with pytest.raises(MpsimInputError, match=r"unknown GEMM kernel 'fa3_decode'; expected None "
                                              r"\(mpsim's\), cublas_gemm or trtllm_wo_gemv"):
        gemm_row(8, 4096, 4096, kernel="fa3_decode")
    with pytest.raises(MpsimInputError, match=r"unknown GEMM kernel 'gemv_fp16_kernel'"):
        gemm_row(8, 4096, 4096, kernel="gemv_fp16_kernel")
    with pytest.raises(MpsimInputError, match=r"attention: unknown kernel 'cublas'; expected None "
                                              r"\(mpsim's\) or 'trtllm' or 'fa3' or 'fa2' or "
                                              r"'flashinfer_attention' or 'flashinfer_trtllm' or "
                                              r"'trtllm_sm89' or 'trtllm_sm100' or 'sglang'"):
        attention_row(1, 1, 64, 8, 8, 64, kernel="cublas")
    with pytest.raises(MpsimInputError, match=r"unknown row-wise kernel 'cublas_gemm'.*'torch_add'"):
        framework_op_row("cublas_gemm", 4, 4096)
    assert gemm_row(8, 4096, 4096, kernel="cublas_gemm")["kernel"] == "cublas_gemm"
    assert framework_op_row("torch_add", 4, 4096)["kernel"] == "torch_add"


def test_a_kernel_in_two_rooms_is_an_error() -> None:
    builder = work_library.WORK["torch_add"]
    with pytest.raises(RuntimeError, match="'k' has two work models: rooms a and b"):
        work_library.table({"a": {"k": builder}, "b": {"k": builder}})


def test_every_room_constant_has_a_dotted_name_in_the_fingerprint() -> None:
    names = float_param_names()
    assert "cublas.tile_ns" in names and "fa3.softmax_ops" in names and "torch.add_iter_ns" in names
    for lib in LIBRARY_FIELDS:  # every float field of every room is named
        room = getattr(DEFAULT_PARAMS, lib)
        floats = {f"{lib}.{f.name}" for f in dataclasses.fields(room) if f.type in (float, "float")}
        assert floats <= set(names), lib
    for name in names:
        changed = with_params(DEFAULT_PARAMS, {name: get_param(DEFAULT_PARAMS, name) * 1.5 + 1.0})
        assert get_param(changed, name) == get_param(DEFAULT_PARAMS, name) * 1.5 + 1.0
        assert changed.fingerprint() != DEFAULT_PARAMS.fingerprint(), name
    # the flat names of files written before the rooms map onto existing dotted names
    assert set(LEGACY_NAMES.values()) <= {*names, "cublas.token_granule"}


def test_gemm_kernels_are_only_gemm_kernels() -> None:
    """`gemm_row(kernel=...)` and `mpsim op gemm --kernel` take GEMM kernels only, not the attention
    kernels a room that has both (TensorRT-LLM's) also owns."""
    from mpsim.library import GEMM_KERNELS
    from mpsim.library.trtllm_attention import ATTENTION_KERNELS

    assert not set(GEMM_KERNELS) & set(ATTENTION_KERNELS)
    assert {"cublas_gemm", "trtllm_wo_gemv", "trtllm_fpaintb_gemm"} <= set(GEMM_KERNELS)


@pytest.mark.parametrize("kernel", [None, "fa2"])
def test_fp16_prefill_rooms_refuse_a_quantized_prefill_kv(kernel: str | None) -> None:
    """mpsim's and FA2's prefill attend to the prompt's fresh 16-bit K/V; TensorRT-LLM's context
    FMHA and FA3's fp8 forward (vLLM's, SGLang's) run over an fp8 cache (each room decides, not a
    kernel-name check in launch_plan)."""
    with pytest.raises(MpsimInputError, match=r"attention: prefill \(q_len > 1\) attends to fp16 K/V"):
        attention_row(1, 64, 64, 8, 8, 64, 8, kernel=kernel)
    assert attention_row(1, 64, 64, 8, 8, 64, 8, kernel="trtllm")["kernel"] == "trtllm_context_fmha"


@pytest.mark.parametrize(("kernel", "lo", "hi"), [("fa3", 0.9, 1.3), ("sglang", 0.55, 0.9)])
def test_fa3_prefill_over_an_fp8_cache_runs_at_the_fp8_rate(kernel: str, lo: float, hi: float) -> None:
    """FA3's fp8 forward (an fp8 e4m3 cache; it has no mixed-dtype kernel, so FP8 attention compute is
    an fp8 cache's only): its MMAs at the fp8 tensor rate (the roofline's bound too) at each build's
    share of peak, vLLM's after its query-cast kernel: a 2 ms causal prefill takes about the bf16
    time in vLLM's build and less in SGLang's, as their H200 rows (median fp8/bf16 ratios between 1
    and 5 ms: vLLM 1.11x, SGLang 0.81x; above 5 ms 0.99x and 0.71x, docs/validation.md)."""
    from mpsim.hw_models.loader import load_hardware
    from mpsim.sim.launch import simulate_launch

    hw = load_hardware("h200-sxm")
    fp8 = attention_row(8, 4096, 4096, 32, 8, 128, 8, kernel=kernel, fp8_attention=True)
    bf16 = attention_row(8, 4096, 4096, 32, 8, 128, 16, kernel=kernel)
    assert json.loads(str(fp8["config"]))["fp8"] == 1 and "fp8" not in json.loads(str(bf16["config"]))
    ratio = simulate_launch(fp8, hw).time_s / simulate_launch(bf16, hw).time_s
    assert lo < ratio < hi
    with pytest.raises(MpsimInputError, match=r"FA3's FP8 attention reads an fp8 KV cache"):
        attention_row(1, 64, 64, 8, 8, 64, 16, kernel=kernel, fp8_attention=True)
