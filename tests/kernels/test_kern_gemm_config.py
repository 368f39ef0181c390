"""launch_config.gemm_config: the path, grid and blocks the launchers run with, at real model shapes.

Pure functions, no kernels: checks that every GPU config the benchmark and the engine will ask for is
one the launchers accept (the grid covers the output, BLOCK_K never straddles a group, every K split
has work), so a synthesized trace never carries a config the real kernel could not run.
"""

from __future__ import annotations

import itertools

import pytest

from mpsim.kernels.gemm_common import k_per_split
from mpsim.kernels.launch_config import GEMV_MAX_ROWS, cdiv, gemm_config, gemv_k_unit

SHAPES = [(12288, 4096), (4096, 4096), (11008, 4096), (22016, 4096), (4096, 11008),
          (32000, 4096), (6144, 2048), (2048, 2048), (5632, 2048), (2048, 5632), (32000, 2048),
          (129, 160), (5, 7)]
FORMATS = [("fp16", 16, None), ("int8-group", 8, 128), ("int4-group", 4, 128),
           ("int3-group", 3, 32), ("int2-group", 2, 64), ("int4-group", 4, 4096),
           ("int3-group", 3, 96), ("anyprec", 3, None)]
ROWS = (1, 2, 7, 16, 17, 64, 128, 512)


@pytest.mark.parametrize("on_gpu", (True, False))
def test_every_config_is_runnable(on_gpu: bool) -> None:
    for (n, k), (fmt, bits, group), m in itertools.product(SHAPES, FORMATS, ROWS):
        cfg = gemm_config(m, n, k, fmt, bits, group, on_gpu=on_gpu)
        where = f"{fmt} m={m} n={n} k={k}: {cfg}"
        assert cfg.block_m and cfg.block_n and cfg.block_k, where
        assert cfg.block_k >= 32 and cfg.block_k & (cfg.block_k - 1) == 0, where
        if group is not None:
            bk = cfg.block_k
            assert (group % bk if bk <= group else bk % group) == 0, where
        if m <= GEMV_MAX_ROWS:
            assert cfg.kernel.startswith("gemv_") and cfg.block_m >= m, where
            assert cfg.grid == (cdiv(n, cfg.block_n), cfg.split_k), where
            unit = gemv_k_unit(cfg.kernel.split("_")[1], bits, group, cfg.block_m, cfg.block_k)
            per = k_per_split(k, cfg.split_k, unit)
            assert (cfg.split_k - 1) * per < k <= cfg.split_k * per, where  # no empty split
        else:
            assert cfg.kernel.startswith("gemm_") and cfg.split_k == 1, where
            assert cfg.grid == (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n),), where


def test_gpu_gemv_fills_the_machine_without_tiny_splits() -> None:
    """Decode GEMVs at 7B shapes launch about 2 waves of 132 SMs worth of programs (at least 1.8:
    the one-row int4 GEMV's splits start on 128-column runs, kernels/gemv_group.py, so K = 11008's
    86 runs make 15 splits of 6 at most 16), >= 2 K iterations each."""
    for n, k in SHAPES[:6]:
        cfg = gemm_config(1, n, k, "int4-group", 4, 128)
        assert cfg.programs >= 240, cfg
        unit = gemv_k_unit("group", 4, 128, 1, cfg.block_k)
        assert k_per_split(k, cfg.split_k, unit) >= 2 * unit, cfg


def test_interpreter_configs_are_wide_and_fixed() -> None:
    a = gemm_config(7, 129, 160, "int3-group", 3, 32, on_gpu=False)
    b = gemm_config(7, 4096, 4096, "int3-group", 3, 32, on_gpu=False)
    assert (a.block_n, a.block_k, a.num_stages) == (b.block_n, b.block_k, b.num_stages) == (128, 256, 1)
    assert gemm_config(7, 129, 256, "int4-group", 4, 96, on_gpu=False).block_k == 32
    assert a.split_k == 1 and b.split_k == 2


def test_unknown_format_is_an_error() -> None:
    with pytest.raises(ValueError, match="w_format"):
        gemm_config(1, 8, 8, "int5-group-x", 5, 32)
    with pytest.raises(ValueError, match="positive"):
        gemm_config(0, 8, 8, "fp16", 16, None)
