"""mpsim's own fp8 / fp4 / fp8-KV kernels in synthesis and the simulator (issue 26 point 5): the
rows the launchers record (the same config functions, kernels/launch_config_fp.py), the SASS rows
the GPU model reads for them (sass_table_fp.py), and the device that has no fp8 tensor cores."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.kernels import launch_config_fp as lf
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.gpu import sass_table, sass_table_fp
from mpsim.sim.gpu.sass import per_weight_mix
from mpsim.synth import synthesize
from mpsim.workload import Workload

SPEC = PRESETS["mobilellama-1.4b"]  # hidden 2048, ffn 5632, 16 heads of 128
WL = Workload(40, 3, 4)  # prefill M = 160, decode M = 4


def _rows(policy: str, wl: Workload = WL) -> pd.DataFrame:
    return synthesize(SPEC, parse_policy(policy), wl).rows.sort_values("launch_id").reset_index(drop=True)


def _config(cfg: lf.LaunchConfig) -> tuple[str, list[int], dict[str, int]]:
    return cfg.kernel, list(cfg.grid), cfg.config_dict()


def _as_built(row: pd.Series) -> tuple[str, list[int], dict[str, int]]:
    return str(row["kernel"]), json.loads(row["grid"]), json.loads(row["config"])


@pytest.mark.parametrize(("policy", "gemm", "quant", "config", "quant_config"), [
    ("fp8", "gemm_fp8_kernel", "fp8_act_quant_kernel", lf.gemm_fp8_config,
     lambda m, k: lf.act_quant_config(m, k)),
    ("fp8grow", "gemm_fp8_kernel", "fp8_act_quant_kernel", lf.gemm_fp8_config,
     lambda m, k: lf.act_quant_config(m, k)),
    ("fp8b", "gemm_fp8b_kernel", "fp8_group_quant_kernel", lf.gemm_fp8b_config, lf.group_quant_config),
])
def test_w8a8_gemms_follow_their_activation_quantization_with_the_launchers_configs(
        policy: str, gemm: str, quant: str, config, quant_config) -> None:  # type: ignore[no-untyped-def]
    rows = _rows(policy)
    gemms = rows[(rows["op"] == "gemm") & (rows["module"] != "lm_head")]
    assert set(gemms["kernel"]) == {gemm} and set(gemms["a_dtype"]) == {"fp8-e4m3"}
    before = rows.loc[gemms.index - 1]
    assert set(before["kernel"]) == {quant} and set(before["op"]) == {"other"}
    assert (before["module"].to_numpy() == (gemms["module"].astype(str) + "_act_quant").to_numpy()).all()
    for (_, g), (_, q) in zip(gemms.iterrows(), before.iterrows(), strict=True):
        m, n, k = int(g["m"]), int(g["n"]), int(g["k"])
        assert _as_built(g) == _config(config(m, n, k))
        assert (int(q["m"]), int(q["n"])) == (m, k) and _as_built(q) == _config(quant_config(m, k))
        # reads: codes + one fp32 per token (per 1x128 group for fp8b), weights + their scales
        groups = 1 if policy != "fp8b" else -(-k // 128)
        w_scales = {"fp8": 4, "fp8grow": 4 * n, "fp8b": 4 * -(-n // 128) * -(-k // 128)}[policy]
        assert int(g["bytes_read"]) == m * k + 4 * m * groups + n * k + w_scales
    head = rows[rows["module"] == "lm_head"]
    assert set(head["w_format"]) == {"fp16"} and not rows.loc[head.index - 1, "op"].eq("other").any()


@pytest.mark.parametrize("policy", ["nvfp4", "mxfp4"])
def test_fp4_weights_are_one_weight_only_launch(policy: str) -> None:
    rows = _rows(policy)
    assert not rows["kernel"].isin(["fp8_act_quant_kernel", "fp8_group_quant_kernel"]).any()
    gemms = rows[(rows["op"] == "gemm") & (rows["module"] != "lm_head")]
    assert set(gemms["kernel"]) == {"gemv_fp4_kernel"} and set(gemms["a_dtype"]) == {"fp16"}
    for _, g in gemms.iterrows():
        m, n, k = int(g["m"]), int(g["n"]), int(g["k"])
        assert _as_built(g) == _config(lf.gemv_fp4_config(m, n, k, policy))


def test_an_fp8_cache_is_written_and_read_by_the_fp8_kernels() -> None:
    rows = _rows("fp16+kv8f")
    writes = rows[rows["op"] == "kv_quant"]
    assert set(writes["kernel"]) == {lf.KV_FP8_QUANT_KERNEL} and set(writes["kv_format"]) == {"fp8-e4m3"}
    tokens = {"prefill": WL.batch * WL.prompt_len, "decode": WL.batch}
    for _, w in writes.iterrows():
        assert _as_built(w) == _config(lf.kv_fp8_quant_config(tokens[w["phase"]], 2 * 16, 128))
        assert int(w["bytes_written"]) == tokens[w["phase"]] * 16 * 2 * 128  # 1 B a value, K and V
    attn = rows[rows["op"] == "attention"]
    decode, prefill = attn[attn["q_len"] == 1], attn[attn["q_len"] > 1]
    assert set(decode["kernel"]) == {lf.DECODE_FP8_KERNEL} and set(decode["kv_format"]) == {"fp8-e4m3"}
    assert set(prefill["kernel"]) == {"attention_prefill_kernel"}
    for _, a in decode.iterrows():
        assert _as_built(a) == _config(lf.attention_decode_fp8_config(
            WL.batch, 16, 16, 128, int(a["kv_len"]), None))
    assert set(rows[rows["op"] == "gemm"]["kernel"]) <= {"gemv_fp16_kernel", "gemm_fp16_kernel"}


def test_the_fp_sass_rows_share_the_tables_columns_and_are_what_the_model_reads() -> None:
    assert set(sass_table_fp.COLUMNS) == set(sass_table.COLUMNS)
    rows = [dict(zip(sass_table_fp.COLUMNS, r, strict=True)) for r in sass_table_fp.ROWS]
    every = {"gemm_fp8_kernel", "gemm_fp8b_kernel", "gemv_fp4_kernel", "fp8_act_quant_kernel",
             lf.DECODE_FP8_KERNEL}
    assert {r["kernel"] for r in rows if r["arch"] == "sm_90a"} == every
    # sm_80: only the kernels without e4m3 conversions (no fp8 tensor cores there)
    assert {r["kernel"] for r in rows if r["arch"] == "sm_80"} == {"gemv_fp4_kernel",
                                                                   lf.DECODE_FP8_KERNEL}
    for r in rows:
        got = per_weight_mix(r["kernel"], r["bits"], r["block_m"], r["block_n"], r["block_k"],
                             r["num_warps"], r["arch"], w_format=r["w_format"],
                             loop_stages=r["loop_stages"])
        assert got == {k: float(r[k]) for k in got}
    with pytest.raises(ValueError, match="no sm_90a SASS instruction mix for gemv_fp4_kernel"):
        per_weight_mix("gemv_fp4_kernel", 8, 1)


def _decode_s(policy: str, hw: str, spec_name: str = "vicuna-7b", batch: int = 1) -> float:
    tr = synthesize(PRESETS[spec_name], parse_policy(policy), Workload(64, 3, batch))
    return simulate(tr, load_hardware(hw), cache_dir=None).summary.tpot_mean_s


@pytest.mark.parametrize(("hw", "policy"), [("h200-sxm", "fp8+kv8f"), ("h200-sxm", "fp8b"),
                                            ("h200-sxm", "nvfp4"), ("b200-sxm", "nvfp4"),
                                            ("b200-sxm", "fp8+kv8f")])
def test_decode_prices_between_the_weight_bytes_ratio_and_fp16(hw: str, policy: str) -> None:
    """Fewer weight bytes decode faster than fp16 at batch 1, never faster than the bytes ratio
    allows (fp8 about 1/2 of fp16's weight bytes, fp4 about 0.28) of fp16's weights streamed: the
    fp16 step at batch 1, whose one-row GEMVs run their K loop pipelined (loop_stages; unpipelined
    they were latency-bound, ~2x slower than their bytes, docs/validation.md#mpsims-own-kernels-on-an-h200).
    (A 1.4B model on B200 gains only ~5% with fp8: its four activation-quantization launches a
    layer cost about what the halved weight bytes save.)"""
    fp16, low = _decode_s("fp16", hw), _decode_s(policy, hw)
    floor = 0.28 if "fp4" in policy else 0.5
    assert floor * fp16 < low < fp16


def test_a_device_without_fp8_tensor_cores_is_one_error_naming_it() -> None:
    tr = synthesize(SPEC, parse_policy("fp8"), Workload(8, 2, 1))
    with pytest.raises(MpsimInputError, match=r"fp8_act_quant_kernel.*a100-sxm-80gb: no fp8 tensor cores"):
        simulate(tr, load_hardware("a100-sxm-80gb"), cache_dir=None)
    assert simulate(synthesize(SPEC, parse_policy("nvfp4+kv8f"), Workload(8, 2, 1)),
                    load_hardware("a100-sxm-80gb"), cache_dir=None).summary.tpot_mean_s > 0


def test_model_guided_configs_keep_the_fp_gemms_launcher_config() -> None:
    """`synth --config best`: the fp16 lm_head is searched; the fp8 GEMMs (no candidate set) and
    their quantization launches keep the launcher's config."""
    from mpsim.sim.best_config import with_best_gemm_configs

    tr = synthesize(SPEC, parse_policy("fp8+kv8f"), Workload(8, 2, 1))
    best, info = with_best_gemm_configs(tr, load_hardware("h200-sxm"))
    fp = (tr.rows["w_format"] == "fp8").to_numpy()
    for col in ("kernel", "grid", "config"):
        assert best.rows.loc[fp, col].astype(str).tolist() == tr.rows.loc[fp, col].astype(str).tolist()
    assert info["shapes"] == 1  # lm_head alone
