"""Engine files (mpsim/data/engines): read and checked loudly, every op covered, only kernels the
dispatch tables know, the policy-support error, and passes built as an engine's kernels."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from importlib import resources

import pytest

from mpsim.engines import (
    ARCHES,
    DEFAULT_ENGINE,
    EngineChoice,
    architecture,
    check_policy,
    engine_names,
    get_engine,
)
from mpsim.engines.files import FUSED, NONE, OPS, parse_engine
from mpsim.engines.reprice import reprice
from mpsim.engines.rows import KERNELS_BY_OP, LOWP_GEMM_KERNELS, PENDING_KERNELS, choose
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim.gpu.arch import generation
from mpsim.sim.gpu.library import work_for
from mpsim.synth import synthesize
from mpsim.workload import Workload

SHIPPED = ("mpsim", "sglang", "sglang-torchnative", "trtllm", "turbomind", "vllm")
SPEC = PRESETS["mobilellama-1.4b"]


def _text(name: str) -> str:
    return resources.files("mpsim").joinpath("data", "engines", f"{name}.yaml").read_text("utf-8")


def test_the_shipped_engines_load_and_cover_every_op() -> None:
    assert tuple(engine_names()) == SHIPPED
    for name in SHIPPED:
        engine = get_engine(name)
        assert engine.name == name and [op for op, _ in engine.ops] == list(OPS)
        for op, formats in engine.ops:
            for fmt, _ in formats:
                for arch in ARCHES:  # every architecture and M has a kernel
                    assert choose(engine, op, fmt, 10**6, arch).kernel in (*KERNELS_BY_OP[op], FUSED, NONE)


def test_every_named_kernel_is_in_both_dispatch_tables() -> None:
    """A kernel an engine file names is one a library room builds rows for (mpsim/library) and the
    GPU model prices (mpsim/sim/gpu/library: work_for fails loudly on an unknown kernel); the
    all-reduce kernels are collectives, priced by mpsim/sim/collectives.py instead; the fp8 / fp4
    GEMM kernels of issue 26 whose rooms have not landed are the only other exception
    (PENDING_KERNELS)."""
    from mpsim.library import LIBRARIES, library_of
    from mpsim.library.collectives import LIBRARY_OF_KERNEL

    choices = [c for n in SHIPPED for _, fs in get_engine(n).ops for _, cs in fs for c in cs]
    named = {c.kernel for c in choices} - {FUSED, NONE}
    quantizers = {c.act_quant for c in choices}
    assert named <= {k for ks in KERNELS_BY_OP.values() for k in ks}
    collectives = {c.kernel for n in SHIPPED for c in get_engine(n).choices("allreduce", "any")}
    assert collectives == {"nccl_allreduce", "vllm_custom_allreduce", "trtllm_custom_allreduce"}
    assert collectives <= set(LIBRARY_OF_KERNEL)
    assert set(PENDING_KERNELS) <= set(LOWP_GEMM_KERNELS)
    for kernel in (named | quantizers) - {None, FUSED} - collectives - set(PENDING_KERNELS):
        assert library_of(kernel).name in LIBRARIES
        assert callable(work_for(kernel))


def test_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(MpsimInputError, match=re.escape(
            "unknown engine 'tensorrt'; expected one of ['mpsim', 'sglang', 'sglang-torchnative', "
            "'trtllm', 'turbomind', 'vllm']")):
        get_engine("tensorrt")


@pytest.mark.parametrize(("edit", "message"), [
    (("kernel: cublas_gemm", "kernel: cutlass_gemm"),
     "ops.gemm.fp16[0].kernel: 'cutlass_gemm' is not a kernel of the library dispatch table that "
     "serves this op"),
    (("kernel: argmax_kernel", "kernel: cublas_gemm"), "ops.sample.any[0].kernel: 'cublas_gemm' is not"),
    (("  gelu:\n", "  gelu_typo:\n"), "ops: unknown key 'gelu_typo'"),
    (("kv_cache: [kv16, kv8, kv8f]", "kv_cache: [kv16, kv8, kv8f, kv4]"), "ops.kv_write: missing key 'kv4'"),
    (("name: trtllm", "name: trtllm\nname: vllm"), "duplicate key 'name'"),
    (("max_m: 4,", "max_m: 0,"), "ops.gemm.int8-group[0].max_m: expected a whole number >= 1, got 0"),
    (("{group_sizes: [row, 64, 128]}", "{group_sizes: [row, 48]}"), "48 is not 'row' or a multiple of 32"),
])
def test_a_bad_engine_file_is_one_error_naming_file_and_key(edit: tuple[str, str], message: str) -> None:
    text = _text("trtllm")
    assert edit[0] in text
    with pytest.raises(MpsimInputError, match=re.escape(message)) as err:
        parse_engine(text.replace(edit[0], edit[1], 1), "x/trtllm.yaml", KERNELS_BY_OP)
    assert str(err.value).startswith("engine file x/trtllm.yaml: ")


def test_an_architecture_left_without_a_kernel_for_every_m_is_an_error() -> None:
    text = _text("trtllm").replace(
        "      - {kernel: cublas_gemm, source:", "      - {kernel: cublas_gemm, arch: [hopper], source:", 1)
    with pytest.raises(MpsimInputError, match=r"ops.gemm.fp16: no choice covers every M on ampere"):
        parse_engine(text, "t.yaml", KERNELS_BY_OP)


@pytest.mark.parametrize(("engine", "policy", "why"), [
    ("trtllm", "ap3", "it has no any-precision weights"),
    ("trtllm", "w4+kv4", "it has no int4 KV cache (kv4)"),
    ("vllm", "w3", "it has no int3-group weights"),
    ("turbomind", "w4g64", "it has no int4-group weights in groups of 64"),
    ("trtllm", "w8", "it has no int8-group weights in groups of 128"),
])
def test_a_policy_an_engine_cannot_run_is_one_error(engine: str, policy: str, why: str) -> None:
    with pytest.raises(MpsimInputError) as err:
        check_policy(get_engine(engine), parse_policy(policy))
    assert str(err.value).startswith(f"engine {engine!r} cannot run policy {policy!r}: {why}; {engine} runs ")


def test_the_exact_unsupported_policy_message() -> None:
    with pytest.raises(MpsimInputError) as err:
        synthesize(SPEC, parse_policy("ap3"), Workload(8, 2, 1), engine=EngineChoice("trtllm"))
    assert str(err.value) == (
        "engine 'trtllm' cannot run policy 'ap3': it has no any-precision weights; trtllm runs weights "
        "fp16, int8-group (groups row), int4-group (groups row, 64, 128), fp8 (scales tensor), fp8-block, "
        "nvfp4; KV cache kv16, kv8, kv8f; engines that run it: mpsim")


def test_mpsim_runs_every_policy_the_grammar_takes() -> None:
    for spelling in ("fp16", "w2g64", "w3grow", "w8g96+kv4", "ap4-4@3-3+kv8"):
        check_policy(get_engine(DEFAULT_ENGINE), parse_policy(spelling))


def test_architecture_agrees_with_the_gpu_models_generations() -> None:
    seen = {}
    for name in list_hardware():
        hw = load_hardware(name)
        if isinstance(hw, GpuSpec):
            arch = architecture(hw)
            assert (arch if arch != "ada" else "ampere") == generation(hw)
            seen[name] = arch
    assert (seen["h200-sxm"], seen["a100-sxm-80gb"], seen["l40s"], seen["b200-sxm"]) == (
        "hopper", "ampere", "ada", "blackwell")


def test_trtllm_w4_uses_the_weight_only_gemv_up_to_m_4_and_per_architecture_attention() -> None:
    wl = Workload(16, 3, 2)
    rows = synthesize(SPEC, parse_policy("w4"), wl, engine=EngineChoice("trtllm")).rows
    gemm = rows[(rows["op"] == "gemm") & (rows["module"] != "lm_head")]
    assert set(gemm.loc[gemm["phase"] == "decode", "kernel"]) == {"trtllm_wo_gemv"}  # M = batch 2
    assert set(gemm.loc[gemm["phase"] == "prefill", "kernel"]) == {"trtllm_fpaintb_gemm"}  # M = 32
    assert set(rows.loc[rows["module"] == "lm_head", "kernel"]) == {"cublas_gemm"}
    attn = rows[rows["op"] == "attention"]
    assert set(attn["kernel"]) <= {"trtllm_xqa_decode", "trtllm_mmha_decode", "trtllm_context_fmha"}
    assert "trtllm_context_fmha" in set(attn["kernel"])
    # RoPE and the KV append run inside TRT-LLM's attention op on Hopper: no rows of their own
    assert not rows["op"].isin(["rope", "kv_quant"]).any()
    ampere = synthesize(SPEC, parse_policy("w4"), wl, engine=EngineChoice("trtllm", "ampere")).rows
    count = ampere["op"].value_counts()
    assert count["rope"] == count["kv_quant"] == count["attention"] > 0  # stand-ins off Hopper
    assert attn.loc[attn["q_len"] == 1, "kv_len"].tolist() == [17] * 24 + [18] * 24  # KV grows per step
    # Blackwell: TRT-LLM's own sm_100 op (preprocessing + trtllm-gen), RoPE and KV append inside it
    blackwell = synthesize(SPEC, parse_policy("w4"), wl, engine=EngineChoice("trtllm", "blackwell")).rows
    assert set(blackwell.loc[blackwell["op"] == "attention", "kernel"]) == {"trtllm_tg_decode",
                                                                           "trtllm_tg_context"}
    assert not blackwell["op"].isin(["rope", "kv_quant"]).any()


def test_the_default_engine_and_a_reprice_back_to_it_give_todays_rows() -> None:
    policy, wl = parse_policy("w4+kv8"), Workload(40, 4, 3)
    today = synthesize(SPEC, policy, wl)
    assert today.meta.engine == "mpsim" and "engine_arch" not in today.meta.environment
    trt = synthesize(SPEC, policy, wl, engine=EngineChoice("trtllm", "hopper"))
    assert trt.meta.engine == "trtllm" and not trt.rows.equals(today.rows)
    with pytest.raises(MpsimInputError, match=re.escape(
            "--reprice: the trace's engine 'trtllm' fuses kv_write, rope into its attention kernels "
            "on hopper")):
        reprice(trt, EngineChoice("mpsim", "hopper", 132))
    w4 = parse_policy("w4")  # vLLM's 8-bit KV cache is fp8 (+kv8f), which mpsim's kernels lack
    vllm = synthesize(SPEC, w4, wl, engine=EngineChoice("vllm", "hopper"))
    back = reprice(vllm, EngineChoice("mpsim", "hopper", 132))
    assert back.rows.equals(synthesize(SPEC, w4, wl).rows) and back.meta.engine == "mpsim"
    assert back.meta.environment["repriced_from"] == "vllm"
    assert reprice(today, EngineChoice("trtllm", "hopper", 132)).rows.equals(trt.rows)


def test_vllm_picks_its_attention_kernel_and_gemm_stand_in_per_architecture() -> None:
    engine = get_engine("vllm")
    hopper, ampere = choose(engine, "decode_attention", "kv16", 1, "hopper"), choose(
        engine, "decode_attention", "kv16", 1, "ampere")
    assert (hopper.kernel, hopper.stands_in_for) == ("fa3_decode", None)
    assert (ampere.kernel, ampere.stands_in_for) == ("fa2_decode", None)
    # FA2 has no fp8 cache: vLLM runs FlashInfer there; Blackwell runs FlashInfer's trtllm-gen kernels
    ada8 = choose(engine, "decode_attention", "kv8f", 1, "ada")
    assert (ada8.kernel, ada8.stands_in_for) == ("flashinfer_decode", None)
    bw = choose(engine, "prefill_attention", "any", 512, "blackwell")
    assert (bw.kernel, bw.stands_in_for) == ("flashinfer_trtllm_prefill", None)
    w4_hopper, w4_ada = (choose(engine, "gemm", "int4-group", 1, a) for a in ("hopper", "ada"))
    assert (w4_hopper.kernel, w4_hopper.stands_in_for) == ("machete_gemm", None)
    assert (w4_ada.kernel, w4_ada.stands_in_for) == ("marlin_gemm", None)


def test_a_file_cut_off_the_launcher_disagrees_with_is_an_error() -> None:
    """An mpsim GEMV named up to M = 32 where mpsim's launcher takes its tiled GEMM above 16."""
    from mpsim.engines.rows import Target
    from mpsim.launch_plan import PassShape, pass_rows
    from mpsim.policy import FP16_WEIGHTS

    engine = get_engine("mpsim")
    ops = tuple((op, tuple((f, tuple(replace(c, max_m=32) if c.max_m == 16 else c for c in cs))
                           for f, cs in fs)) for op, fs in engine.ops)
    target = Target(replace(engine, ops=ops), "hopper", (16, 16, 128, 128))
    with pytest.raises(MpsimInputError, match="the file names gemv_fp16_kernel but that library "
                                              "launches gemm_fp16_kernel there"):
        pass_rows(SPEC, PassShape("prefill", 0, 1, 24, 24, FP16_WEIGHTS, 16, target=target))


def test_vllm_runs_the_kernel_its_quantization_method_calls() -> None:
    """GPTQ goes through choose_mp_linear_kernel (Machete first on sm90); AWQ and RTN call Marlin
    directly (awq_marlin.py apply_awq_marlin_linear, rtn.py apply_rtn_marlin_linear)."""
    engine = get_engine("vllm")
    for fmt in ("int4-group", "int8-group"):
        picked = {method: choose(engine, "gemm", fmt, 8, "hopper", 4096, 4096, method).kernel
                  for method in (None, "gptq", "awq", "rtn")}
        assert picked == {None: "machete_gemm", "gptq": "machete_gemm", "awq": "marlin_gemm",
                          "rtn": "marlin_gemm"}
        assert choose(engine, "gemm", fmt, 8, "ampere", 4096, 4096, "gptq").kernel == "marlin_gemm"


def test_a_synthesized_rtn_run_prices_marlin_and_an_unknown_method_is_an_error() -> None:
    hw = load_hardware("h100-sxm")
    wl, policy = Workload(16, 2, 1), parse_policy("w4g128")
    kernels = {m: set(synthesize(SPEC, policy, wl, engine=EngineChoice.on("vllm", hw, m)).rows
                      .query("op == 'gemm' and w_format == 'int4-group'")["kernel"])
               for m in (None, "rtn")}
    assert kernels == {None: {"machete_gemm"}, "rtn": {"marlin_gemm"}}
    with pytest.raises(MpsimInputError, match=r"unknown quantization method 'squeezellm'; expected "
                                              r"one of \['gptq', 'awq', 'rtn', 'gemlite'\]"):
        EngineChoice.on("vllm", hw, "squeezellm")


def test_a_choice_limited_to_an_unknown_method_is_an_error() -> None:
    text = _text("vllm").replace("methods: [gptq]", "methods: [exl2]", 1)
    with pytest.raises(MpsimInputError, match=r"ops.gemm.int8-group\[0\].methods: expected a "
                                              r"non-empty list of \['gptq', 'awq', 'rtn', 'gemlite'\]"):
        parse_engine(text, "v.yaml", KERNELS_BY_OP)


def test_trtllm_scales_an_awq_checkpoints_activations_before_each_cutlass_gemm() -> None:
    """weightOnlyGroupwiseQuantMatmulPlugin: the pre-quant scale is a launch of its own before the
    CUTLASS GEMM (M >= 5); the batched GEMV (M <= 4) applies it in its loads; no AWQ, no launch."""
    hw = load_hardware("h200-sxm")
    policy = parse_policy("w4g128")
    for batch, method, expected in ((8, "awq", True), (8, None, False), (1, "awq", False)):
        rows = synthesize(SPEC, policy, Workload(16, 2, batch),
                          engine=EngineChoice.on("trtllm", hw, method)).rows
        decode = rows[rows["phase"] == "decode"].reset_index(drop=True)
        pre = decode.index[decode["kernel"] == "trtllm_awq_prescale"]
        wo = decode.index[(decode["op"] == "gemm") & (decode["w_format"] == "int4-group")]
        assert (len(pre) == len(wo)) is expected and (len(pre) == 0) is not expected
        if expected:  # each right before its GEMM, over the GEMM's M x K input
            assert list(pre + 1) == list(wo)
            assert (decode.loc[pre, "n"].to_numpy() == decode.loc[wo, "k"].to_numpy()).all()
            assert (decode.loc[pre, "m"] == batch).all()
            assert set(decode.loc[pre, "module"]) == {f"{m}_act_quant" for m in decode.loc[wo, "module"]}


def test_a_16_bit_gemm_takes_only_a_per_channel_scaler_before_it() -> None:
    text = _text("trtllm").replace("act_quant: trtllm_awq_prescale", "act_quant: fp8_act_quant", 1)
    with pytest.raises(MpsimInputError, match=r"ops.gemm.int4-group\[2\].act_quant: 16-bit "
                                              r"activations are not quantized \(only scaled per "
                                              r"channel by one of \['trtllm_awq_prescale'\]\)"):
        parse_engine(text, "t.yaml", KERNELS_BY_OP)


def test_the_awq_prescale_launch_is_trtllms_grid_and_streams_its_input_once() -> None:
    """preQuantScaleKernel.cu: 128 threads of one float4 each, kProcessRows 1 / 4 / 8 / 16 rows by
    size; M x K fp16 in (+ the K scales) and out."""
    from mpsim.launch_plan import framework_op_row

    for m, k, rows in ((8, 4096, 1), (1024, 4096, 4), (4096, 4096, 8), (16384, 4096, 16)):
        row = framework_op_row("trtllm_awq_prescale", m, k)
        assert json.loads(row["grid"]) == [-(-m // rows), k // (8 * 128)]
        assert (row["bytes_read"], row["bytes_written"]) == (2 * m * k + 2 * k, 2 * m * k)


def test_sglang_runs_gemlite_by_m_and_marlin_for_awq() -> None:
    """--torchao-config gemlite-4-64 runs GemLite's kernels as torchao picks them by M (one row the
    GEMV, 2..64 GEMM_SPLITK, more GEMM); AWQ / GPTQ checkpoints run Marlin; GemLite's 8-bit
    one-row GEMV_SPLITK is not modelled: an error naming it."""
    engine = get_engine("sglang")
    picked = {(m, method): choose(engine, "gemm", "int4-group", m, "hopper", 4096, 4096, method)
              for m in (1, 2, 64, 65) for method in ("gemlite", "awq", None)}
    assert {k: c.kernel for k, c in picked.items()} == {
        (1, "gemlite"): "gemlite_gemv_revsplitk", (2, "gemlite"): "gemlite_gemm_splitk",
        (64, "gemlite"): "gemlite_gemm_splitk", (65, "gemlite"): "gemlite_gemm",
        **{(m, x): "marlin_gemm" for m in (1, 2, 64, 65) for x in ("awq", None)}}
    assert all(c.stands_in_for is None for c in picked.values())
    assert choose(engine, "gemm", "int8-group", 1, "hopper", 4096, 4096, "gemlite").kernel == "none"
    assert choose(engine, "gemm", "int8-group", 2, "hopper", 4096, 4096, "gemlite").kernel == \
        "gemlite_gemm_splitk"


def test_the_trace_records_the_method_and_a_reprice_keeps_it() -> None:
    policy, wl = parse_policy("w4g128"), Workload(16, 2, 8)
    rtn = synthesize(SPEC, policy, wl, engine=EngineChoice("vllm", "hopper", 132, "rtn"))
    assert rtn.meta.environment["quant_method"] == "rtn"
    assert "quant_method" not in synthesize(SPEC, policy, wl, engine=EngineChoice("vllm", "hopper",
                                                                                  132)).meta.environment
    again = reprice(rtn, EngineChoice("vllm", "hopper", 132))
    assert list(again.rows["kernel"]) == list(rtn.rows["kernel"])  # Marlin, not Machete
    awq = reprice(rtn, EngineChoice("trtllm", "hopper", 132, "awq"))
    assert (awq.rows["kernel"] == "trtllm_awq_prescale").sum() == \
        (awq.rows["kernel"] == "trtllm_fpaintb_gemm").sum() > 0


def test_an_engine_file_extends_another_op_by_op() -> None:
    """sglang-torchnative `extends: sglang`: its supports and every op it does not name are
    sglang's (the GEMMs, the row-wise kernels), the ops it names its own (NCCL all-reduce, the
    FlashInfer decode stand-in); a missing parent, a cycle or an unknown key is one error naming the
    file."""
    native, base = get_engine("sglang-torchnative"), get_engine("sglang")
    assert native.supports == base.supports
    assert native.choices("gemm", "int4-group") == base.choices("gemm", "int4-group")
    assert native.choices("rms_norm", "any") == base.choices("rms_norm", "any")
    assert [c.kernel for c in native.choices("allreduce", "any")] == ["nccl_allreduce"]
    assert native.choices("decode_attention", "kv16") != base.choices("decode_attention", "kv16")
    files = {"a": "extends: b\nname: a\ndescription: A\nsource: s\n",
             "b": "extends: a\nname: b\ndescription: B\nsource: s\n"}

    def parent(name: str) -> tuple[str, str]:
        if name not in files:
            raise MpsimInputError(f"unknown engine {name!r}; expected one of {sorted(files)}")
        return files[name], f"x/{name}.yaml"
    cycle = r"x/b\.yaml: extends 'a' in a cycle \(x/a\.yaml -> x/b\.yaml -> x/a\.yaml\)"
    with pytest.raises(MpsimInputError, match=cycle):
        parse_engine(files["a"], "x/a.yaml", KERNELS_BY_OP, parent)
    with pytest.raises(MpsimInputError, match=r"unknown engine 'c'"):
        parse_engine("extends: c\nname: d\ndescription: D\nsource: s\n", "x/d.yaml", KERNELS_BY_OP, parent)
    with pytest.raises(MpsimInputError, match=r"x/d\.yaml: unknown key 'opz'"):
        parse_engine("extends: b\nname: d\ndescription: D\nsource: s\nopz: {}\n", "x/d.yaml",
                     KERNELS_BY_OP, parent)
