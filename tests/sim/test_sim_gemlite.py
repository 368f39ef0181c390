"""GemLite's room (mpsim/library/gemlite.py, mpsim/sim/gpu/library/gemlite.py): the kernel by M as
torchao picks it, GemLite 0.4.1's shipped defaults and autotune pruning, the grids its launchers
compute, the zero fill before atomic adds, and the work model's physics on an H100."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library import AUTOTUNED_KERNELS, library_of
from mpsim.library import gemlite as gl
from mpsim.library.cublas import CUBLAS_GEMM
from mpsim.sim.best_config import best_gemm_row, gemm_candidate_configs, with_autotuned_configs
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.gpu.library.gemlite import gemlite_mix
from mpsim.sim.launch import simulate_launch

H100 = load_hardware("h100-sxm")


def row(m: int, n: int = 4096, k: int = 4096, bits: int = 4, group: int = 64,
        config: object = None) -> dict[str, object]:
    fmt = {2: "int2-group", 4: "int4-group", 8: "int8-group"}[bits]
    return gemm_row(m, n, k, fmt, bits, group, False, kernel=gl.matmul_type(m, bits),
                    config=config)  # type: ignore[arg-type]


def test_the_kernel_by_m_is_torchaos_choice() -> None:
    assert [gl.matmul_type(m, 4) for m in (1, 2, 64, 65, 4096)] == [
        gl.GEMLITE_GEMV, gl.GEMLITE_GEMM_SPLITK, gl.GEMLITE_GEMM_SPLITK, gl.GEMLITE_GEMM,
        gl.GEMLITE_GEMM]
    with pytest.raises(ValueError, match="GEMV_SPLITK"):
        gl.matmul_type(1, 8)
    with pytest.raises(ValueError, match=r"runs gemlite_gemm_splitk for M=8"):
        gemm_row(8, 4096, 4096, "int4-group", 4, 64, False, kernel=gl.GEMLITE_GEMV)


def test_bad_shapes_and_formats_are_named() -> None:
    with pytest.raises(ValueError, match=r"multiples of 128.*N=4000"):
        row(1, n=4000)
    with pytest.raises(ValueError, match="group size must be >= 32"):
        gl.check_shape(gl.GEMLITE_GEMV, 4096, 4096, 4, 16)
    with pytest.raises(ValueError, match="int3-group"):
        gemm_row(1, 4096, 4096, "int3-group", 3, 64, False, kernel=gl.GEMLITE_GEMV)


def test_the_shipped_defaults_and_the_launch_grids() -> None:
    """H100 GEMV 256 x 16, 2 warps: grid (N / 256, K / 32); A100 512 x 16; GEMM_SPLITK 16 x 64 x 32
    split 2; GEMM 16 x 32 x 128 fitted to the group and to M (GemLite's pruner: 128 rows from 512)."""
    gemv = json.loads(str(row(1)["config"]))
    assert (gemv["block_n"], gemv["block_k"], gemv["num_warps"], gemv["zero_init"]) == (256, 16, 2, 1)
    assert json.loads(str(row(1)["grid"])) == [16, 128]
    a100 = gl.default_config(gl.GEMLITE_GEMV, 1, 4096, 4096, 64, "ampere")
    assert (a100.block_n, a100.block_k) == (512, 16)
    split = gl.default_config(gl.GEMLITE_GEMM_SPLITK, 32, 4096, 4096, 64)
    assert (split.block_m, split.block_n, split.block_k, split.split_k) == (16, 64, 32, 2)
    assert split.grid == (128, 2)
    gemm = gl.default_config(gl.GEMLITE_GEMM, 1024, 4096, 4096, 64)
    assert (gemm.block_m, gemm.block_n, gemm.block_k, gemm.grid) == (128, 32, 64, (8 * 128,))
    assert dict(gemm.extra)["zero_init"] == 0  # a plain store: no zero fill


def test_autotune_candidates_follow_gemlites_pruning() -> None:
    gemv = gl.candidates(1, 4096, 4096, 4, 64)
    assert {(c.block_n, c.block_k) for c in gemv} == {(128, 8), (128, 16), (128, 32), (256, 8),
                                                      (256, 16), (256, 32), (512, 8), (512, 16),
                                                      (512, 32)}  # 2 BLOCK_K <= 64, area >= 1024
    split = gl.candidates(32, 4096, 4096, 4, 64)
    assert {c.block_m for c in split} == {16, 32} and max(c.split_k for c in split) == 8
    assert all(c.block_k <= 64 and 4096 % (c.block_k * c.split_k) == 0 for c in split)
    assert {c.block_m for c in gl.candidates(64, 4096, 4096, 4, 64)} == {32}  # pruner steps in order
    assert gemm_candidate_configs(32, 4096, 4096, "int4-group", 4, 64, H100,
                                  gl.GEMLITE_GEMM_SPLITK) == split


def test_library_dispatch_and_kernel_count() -> None:
    assert library_of(gl.GEMLITE_GEMV).name == "gemlite"
    assert set(AUTOTUNED_KERNELS) == set(gl.KERNELS)
    assert launch_kernels(row(1)) == 2                       # zero fill, then the GEMV
    assert launch_kernels(row(1024)) == 1


def test_the_one_row_gemv_is_bound_by_its_int_to_fp16_conversions() -> None:
    """Every code takes an I2F (16 lanes per clock per SM on Hopper): at 4 bits the GEMV cannot
    stream at HBM speed, and the model says so (a CUDA-core bound near weights / (SMs x 16) cycles)."""
    mix = gemlite_mix(gl.GEMLITE_GEMV, 4, 1, 256, 16, 2)
    assert 1.0 <= mix["cvt"] <= 1.1 and 5.0 <= mix["issue"] <= 6.5
    out = simulate_launch(row(1, n=28672), H100)
    cvt_s = 28672 * 4096 * mix["cvt"] / (H100.compute_units * 16 * out.clock_hz)
    bytes_s = out.bytes_dram / H100.dram_bandwidth_Bps()
    assert out.bound == "cuda"
    assert cvt_s > bytes_s
    assert cvt_s <= out.time_s <= 1.6 * cvt_s + 5e-6


def test_autotuned_configs_beat_the_shipped_default_and_the_search_is_exact() -> None:
    """At M = 32 the default (16 x 64 x 32, split 2: 64 lock-step trips a CTA) is several times the
    best candidate (wide tiles, split 8); the search is the argmin over every candidate."""
    default = simulate_launch(row(32, n=6144), H100).time_s
    best = best_gemm_row(32, 6144, 4096, "int4-group", 4, 64, hw=H100, kernel=gl.GEMLITE_GEMM_SPLITK)
    assert best.predicted_s < default / 2
    every = [simulate_launch(row(32, n=6144, config=c), H100).time_s
             for c in gl.candidates(32, 6144, 4096, 4, 64)]
    assert best.predicted_s == pytest.approx(min(every), rel=1e-9)


def test_an_engine_trace_gets_autotuned_gemlite_configs_only() -> None:
    from mpsim.engines import EngineChoice
    from mpsim.models import PRESETS
    from mpsim.policy import parse_policy
    from mpsim.synth import synthesize
    from mpsim.workload import Workload

    trace = synthesize(PRESETS["llama-3-8b"], parse_policy("w4g64"), Workload(32, 2, 2),
                       engine=EngineChoice.on("sglang-torchnative", H100, "gemlite"))
    tuned, info = with_autotuned_configs(trace, H100)
    before, after = trace.rows, tuned.rows
    mine = before["kernel"].astype(str).isin(gl.KERNELS)
    assert mine.any() and info["shapes"] >= 4
    assert (before.loc[~mine, "config"].astype(str) == after.loc[~mine, "config"].astype(str)).all()
    assert (before.loc[mine, "kernel"].astype(str) == after.loc[mine, "kernel"].astype(str)).all()
    assert set(after.loc[after["op"] == "gemm", "kernel"].astype(str)) >= {CUBLAS_GEMM}  # lm_head
    assert tuned.meta.environment["launch_configs"].startswith("autotuned for h100-sxm")
