"""Issue 26's policies synthesized as the engines run them: the activation-quantization launch
before each W8A8 / A4 GEMM, the GEMM kernel each engine file names per architecture and M (and
DeepGEMM's shape rule), the policy's a_dtype and kv_format on the rows, and the one errors (a device
an engine cannot run the format on; mpsim's own fp8 / fp4 rows: tests/core/test_fp8_own.py).

The fp8 / fp4 GEMM rooms (row builders, work models) are the fp8 GEMM work's (FP8 contract): where
this build lacks them, `rooms` stands a minimal room in for them (shape columns and a one-CTA
config) so the rows' content can be checked without pricing them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from bad_input_cases import clear_error

from mpsim import library
from mpsim.engines import EngineChoice, get_engine
from mpsim.engines import rows as engine_rows
from mpsim.engines.rows import PENDING_KERNELS, Target, choose
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import LaunchConfig
from mpsim.library.rows import Row, apply_config, gemm_shape
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.workload import Workload

SPEC = PRESETS["mobilellama-1.4b"]  # hidden 2048, ffn 5632: N % 64 and K % 128 hold (DeepGEMM)
WL = Workload(40, 3, 4)  # prefill M = 160, decode M = 4


def _stand_in_gemm(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group: int | None,
                   bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    return apply_config(gemm_shape(m, n, k, fmt, bits, group, bias), LaunchConfig(kernel, (1,), None, None,
                                                                                  None, 4, 1))


@pytest.fixture
def rooms(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The contract's GEMM kernels owned by a stand-in room where this build has none."""
    stand_in = library.Library("fp8_stand_in", PENDING_KERNELS, "test stand-in", "tests", gemm=_stand_in_gemm)
    for kernel in PENDING_KERNELS:
        monkeypatch.setitem(library.OWNER, kernel, stand_in)
    monkeypatch.setattr(engine_rows, "PENDING_KERNELS", ())
    yield


def _rows(policy: str, engine: str, arch: str) -> pd.DataFrame:
    return synthesize(SPEC, parse_policy(policy), WL, engine=EngineChoice(engine, arch)).rows


def _check_quantized_gemms(rows: pd.DataFrame, gemm: str, quant: str | None, a_dtype: str) -> pd.DataFrame:
    """Every decoder GEMM is `gemm` reading `a_dtype`, right after its quantization launch over
    the same M x K (quant None: fused into the producing kernel, no launch of its own); lm_head
    stays a 16-bit cuBLAS GEMM with no quantization before it."""
    ordered = rows.sort_values("launch_id").reset_index(drop=True)
    gemms = ordered[(ordered["op"] == "gemm") & (ordered["module"] != "lm_head")]
    assert set(gemms["kernel"]) == {gemm} and set(gemms["a_dtype"]) == {a_dtype}
    if quant is None:
        assert not ordered["module"].astype(str).str.endswith("_act_quant").any()
        return gemms
    before = ordered.loc[gemms.index - 1]
    assert set(before["kernel"]) == {quant} and set(before["op"]) == {"other"}
    assert (before["m"].to_numpy() == gemms["m"].to_numpy()).all()
    assert (before["n"].to_numpy() == gemms["k"].to_numpy()).all()
    assert (before["module"].to_numpy() == (gemms["module"].astype(str) + "_act_quant").to_numpy()).all()
    head = ordered[ordered["module"] == "lm_head"]
    assert set(head["kernel"]) == {"cublas_gemm"} and set(head["a_dtype"]) == {"fp16"}
    assert not ordered.loc[head.index - 1, "kernel"].isin([quant]).any()
    return gemms


@pytest.mark.usefixtures("rooms")
@pytest.mark.parametrize(("engine", "gemm", "quant", "decode_attention"), [
    ("vllm", "cutlass_fp8_gemm", "fp8_act_quant", {"fa3_decode"}),
    ("sglang", "cutlass_fp8_gemm", "fp8_act_quant", {"sglang_fa3_decode"}),
    # TensorRT-LLM's static per-tensor quantize is fused into the producing kernel (trtllm.yaml)
    ("trtllm", "trtllm_fp8_gemm", None, {"trtllm_xqa_decode", "trtllm_mmha_decode"}),
])
def test_fp8_with_an_fp8_cache_on_hopper(engine: str, gemm: str, quant: str | None,
                                         decode_attention: set[str]) -> None:
    rows = _rows("fp8+kv8f", engine, "hopper")
    gemms = _check_quantized_gemms(rows, gemm, quant, "fp8-e4m3")
    assert set(gemms["w_format"]) == {"fp8"} and gemms["group_size"].isna().all()
    g = gemms.iloc[0]  # bytes: 1 B activations + a scale per token, 1 B weights + one per tensor
    m, n, k = int(g["m"]), int(g["n"]), int(g["k"])
    assert g["bytes_read"] == m * k + 4 * m + n * k + 4
    decode = rows[(rows["op"] == "attention") & (rows["q_len"] == 1)]
    assert set(decode["kernel"]) <= decode_attention and set(decode["kv_format"]) == {"fp8-e4m3"}
    assert set(decode["k_bits"]) == {8}
    prefill = rows[(rows["op"] == "attention") & (rows["q_len"] > 1)]
    assert set(prefill["kv_format"]) == {"fp16"}  # the prompt's fresh 16-bit K/V
    writes = rows[rows["op"] == "kv_quant"]
    assert (engine in ("trtllm", "sglang")) == writes.empty  # the K/V append inside their attention ops
    assert writes.empty or set(writes["kv_format"]) == {"fp8-e4m3"}


@pytest.mark.usefixtures("rooms")
def test_fp8_cache_bytes_are_one_byte_a_value() -> None:
    fp8, int8 = (_rows(p, "trtllm", "hopper") for p in ("w4+kv8f", "w4+kv8"))
    step = (fp8["op"] == "attention") & (fp8["q_len"] == 1) & (fp8["step"] == 1)
    d, kv_heads, tokens = SPEC.head_dim, SPEC.num_kv_heads, 4 * 41
    q = 4 * SPEC.num_heads * d * 2
    assert set(fp8.loc[step, "bytes_read"]) == {q + tokens * kv_heads * 2 * d}
    assert set(int8.loc[step, "bytes_read"]) == {q + tokens * kv_heads * 2 * (d + 4)}
    assert set(int8.loc[step, "kv_format"]) == {"int8"}


@pytest.mark.usefixtures("rooms")
def test_vllm_block_fp8_picks_its_kernel_by_m_shape_and_architecture() -> None:
    rows = _rows("fp8b", "vllm", "hopper")
    gemms = rows[(rows["op"] == "gemm") & (rows["module"] != "lm_head")]
    assert set(gemms.loc[gemms["phase"] == "decode", "kernel"]) == {"flashinfer_fp8_block_gemm"}
    assert set(gemms.loc[gemms["phase"] == "decode", "a_dtype"]) == {"fp16"}  # quantized inside its op
    assert set(gemms.loc[gemms["phase"] == "prefill", "kernel"]) == {"deepgemm_fp8_block_gemm"}
    quant = rows[rows["kernel"] == "fp8_block_act_quant"]
    assert set(quant["phase"]) == {"prefill"} and len(quant) == (gemms["phase"] == "prefill").sum()
    g = gemms[gemms["phase"] == "prefill"].iloc[0]
    m, n, k = int(g["m"]), int(g["n"]), int(g["k"])
    assert g["bytes_read"] == m * k + 4 * m * (k // 128) + n * k + 4 * -(-n // 128) * (k // 128)
    vllm = get_engine("vllm")
    assert choose(vllm, "gemm", "fp8-block", 31, "hopper", 4096, 4096).kernel == "flashinfer_fp8_block_gemm"
    assert choose(vllm, "gemm", "fp8-block", 32, "hopper", 4096, 4096).kernel == "deepgemm_fp8_block_gemm"
    assert choose(vllm, "gemm", "fp8-block", 32, "hopper", 4160, 4096).kernel == "deepgemm_fp8_block_gemm"
    assert choose(vllm, "gemm", "fp8-block", 32, "hopper", 4100, 4096).kernel == "cutlass_fp8_block_gemm"
    assert choose(vllm, "gemm", "fp8-block", 32, "hopper", 4096, 4160).kernel == "cutlass_fp8_block_gemm"
    assert choose(vllm, "gemm", "fp8-block", 1, "ada", 4096, 4096).kernel == "triton_fp8_block_gemm"
    trtllm = get_engine("trtllm")
    assert choose(trtllm, "gemm", "fp8-block", 1, "ada", 4096, 4096).kernel == "trtllm_fp8_block_gemm"
    ada = _rows("fp8b", "vllm", "ada")
    _check_quantized_gemms(ada, "triton_fp8_block_gemm", "fp8_block_act_quant", "fp8-e4m3")


@pytest.mark.usefixtures("rooms")
@pytest.mark.parametrize(("engine", "gemm"), [("vllm", "flashinfer_nvfp4_gemm"),
                                              ("trtllm", "trtllm_nvfp4_gemm")])
def test_nvfp4_on_b200_runs_a4_gemms(engine: str, gemm: str) -> None:
    choice = EngineChoice.on(engine, load_hardware("b200-sxm"))
    assert choice.arch == "blackwell"
    rows = synthesize(SPEC, parse_policy("nvfp4"), WL, engine=choice).rows
    gemms = _check_quantized_gemms(rows, gemm, "nvfp4_act_quant", "fp4-e2m1")
    assert set(gemms["w_format"]) == {"nvfp4"} and set(gemms["group_size"]) == {16}
    g = gemms.iloc[0]
    m, n, k = int(g["m"]), int(g["n"]), int(g["k"])
    assert g["bytes_read"] == m * k // 2 + m * (k // 16) + 4 + n * k // 2 + n * (k // 16) + 4


@pytest.mark.parametrize(("policy", "engine", "arch", "message"), [
    ("mxfp4", "vllm", "blackwell", "it has no mxfp4 weights"),
    ("fp8grow", "trtllm", "hopper", "it has no fp8 weights in scales per row; trtllm runs"),
    ("w4+kv8", "vllm", "hopper", "it has no int8 KV cache (kv8) (its 8-bit cache is fp8 e4m3: +kv8f)"),
    ("nvfp4", "vllm", "hopper", "vllm does not run this there: FP4 tensor cores are Blackwell's"),
    ("nvfp4", "trtllm", "ada", "NVFP4 needs Blackwell's FP4 tensor cores"),
    ("fp8", "vllm", "ampere", "as W8A16 through Marlin's fp8 kernel"),
    ("fp8b", "trtllm", "ampere", "FP8 block scales need fp8 tensor cores (sm_89 and later)"),
])
def test_a_combination_that_cannot_run_is_one_error(policy: str, engine: str, arch: str | None,
                                                    message: str) -> None:
    with pytest.raises(MpsimInputError, match=re.escape(message)):
        synthesize(SPEC, parse_policy(policy), WL, engine=EngineChoice(engine, arch))


def test_the_cli_refuses_a_format_an_engine_cannot_run_on_the_device(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """mpsim's own kernels run fp8 (tests/core/test_fp8_own.py); vLLM has no nvfp4 on Hopper."""
    out = str(tmp_path / "x.parquet")
    clear_error(["synth", "--model", "tiny", "--prompt-len", "8", "--gen-len", "2", "--policy", "nvfp4",
                 "--engine", "vllm", "--hw", "h200-sxm", "--out", out], capsys,
                "vllm does not run this there")
    assert not Path(out).exists()


def _a_row_for(kernel: str) -> tuple[Row, Target]:
    """A GEMM row (shape only) and a target whose engine file picks `kernel` for it."""
    from mpsim.engines.files import ARCHES

    for name in ("vllm", "trtllm", "sglang"):
        engine = get_engine(name)
        for fmt, _ in dict(engine.ops)["gemm"]:
            for arch in ARCHES:
                for m, n, k in ((1, 4096, 4096), (64, 4096, 4096), (64, 4100, 4096)):
                    if choose(engine, "gemm", fmt, m, arch, n, k).kernel == kernel:
                        w = {"fp8": (8, None), "fp8-block": (8, 128), "nvfp4": (4, 16)}[fmt]
                        row = {**gemm_shape(m, n, k, fmt, w[0], w[1], False), "kernel": None,
                               "module": "qkv", "layer": 0}
                        return row, Target(engine, arch, (32, 8, 128, 128))
    raise AssertionError(f"no engine file names {kernel}")


@pytest.mark.parametrize("kernel", PENDING_KERNELS or ["none pending"])
def test_a_gemm_kernel_without_its_room_is_one_error(kernel: str) -> None:
    if kernel == "none pending":
        pytest.skip("every fp8 / fp4 GEMM kernel of the engine files has its room in this build")
    row, target = _a_row_for(kernel)
    with pytest.raises(MpsimInputError, match=f"{kernel}: this build has no row builder or work model"):
        engine_rows.engine_rows(row, target)


@pytest.mark.usefixtures("rooms")
@pytest.mark.parametrize("to", ["sglang", "trtllm"])
def test_a_reprice_takes_the_target_engines_quantization_launches(to: str) -> None:
    """vLLM's fp8 trace repriced as SGLang's or TRT-LLM's is that engine's own synthesis, launch for
    launch: the old quantization launches dropped, the new engine's added before its GEMMs."""
    from mpsim.engines.reprice import reprice

    wl, policy = Workload(40, 2, 4), parse_policy("fp8+kv8f")
    vllm = synthesize(SPEC, policy, wl, engine=EngineChoice("vllm", "hopper"))
    own = synthesize(SPEC, policy, wl, engine=EngineChoice(to, "hopper")).rows
    back = reprice(vllm, EngineChoice(to, "hopper", 132)).rows
    for col in ("launch_id", "kernel", "module", "layer", "phase", "step", "m", "n", "k", "a_dtype",
                "kv_format", "flops", "bytes_read", "bytes_written"):
        assert back[col].astype(object).tolist() == own[col].astype(object).tolist(), col
