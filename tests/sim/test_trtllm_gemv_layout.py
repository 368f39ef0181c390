"""TensorRT-LLM's batched GEMV runs a weight layout per SM version (kernelLauncher.h): the layout sets
the rows a CTA covers and the K a step walks; the pre-Hopper build has its own fixed cost."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import gemm_row
from mpsim.library.trtllm import TRTLLM_WO_GEMV, gemv_layout, trtllm_wo_config
from mpsim.library.trtllm_fpaintb import TRTLLM_FPAINTB
from mpsim.sim.best_config import gemm_candidate_configs
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS, SimParams

H200, L40S = load_hardware("h200-sxm"), load_hardware("l40s")
assert isinstance(H200, GpuSpec) and isinstance(L40S, GpuSpec)


@pytest.mark.parametrize(("arch", "bits", "layout"), [
    ("hopper", 4, (1, 32)), ("hopper", 8, (1, 16)),        # ColumnMajorInterleavedForHopper
    ("ada", 4, (4, 32)), ("ampere", 8, (2, 16)),            # ColumnMajorInterleaved, TileSizeK 64
    ("blackwell", 4, (1, 8)), ("blackwell", 8, (1, 8)),     # ColumnMajor: kStepK = 128 / 16
])
def test_layout_by_sm_version(arch: str, bits: int, layout: tuple[int, int]) -> None:
    assert gemv_layout(arch, bits) == layout


def test_an_interleaved_cta_covers_more_rows_and_walks_more_steps_of_the_same_bytes() -> None:
    for bits in (4, 8):
        hopper = trtllm_wo_config(1, 4096, 8192, bits, "hopper")
        ada = trtllm_wo_config(1, 4096, 8192, bits, "ada")
        interleave = 1024 // (64 * bits)
        assert ada.block_n == 8 * interleave and hopper.block_n == 8
        assert hopper.grid == (1, 4096 // 8) and ada.grid == (1, 4096 // (8 * interleave))
        # a step moves 128 threads x 16 bytes of weights in both layouts
        assert hopper.block_n * hopper.block_k * bits // 8 == ada.block_n * ada.block_k * bits // 8 == 16384
        assert dict(ada.extra) == {"sm80": 1} and hopper.extra == ()


def test_the_search_on_a_device_takes_its_sm_versions_layout() -> None:
    l40s = gemm_candidate_configs(2, 4096, 4096, "int4-group", 4, 4096, L40S, TRTLLM_FPAINTB)
    gemv = [c for c in l40s if c.kernel == TRTLLM_WO_GEMV]
    assert len(gemv) == 1 and gemv[0].block_n == 32
    assert all(dict(c.extra).get("sm80") == 1 for c in l40s)   # CUTLASS 2 tiles and the GEMV
    h200 = gemm_candidate_configs(2, 4096, 4096, "int4-group", 4, 4096, H200, TRTLLM_FPAINTB)
    assert [c.block_n for c in h200 if c.kernel == TRTLLM_WO_GEMV] == [8]


def _gemv_s(hw: GpuSpec, params: SimParams = DEFAULT_PARAMS) -> float:
    arch = "hopper" if hw is H200 else "ada"
    cfg = trtllm_wo_config(1, 4096, 4096, 4, arch)
    row = gemm_row(1, 4096, 4096, "group", 4, 4096, kernel=TRTLLM_WO_GEMV, config=cfg,
                   sms=hw.compute_units)
    assert json.loads(row["config"]).get("sm80") == (1 if arch == "ada" else None)
    return float(price_launch(row, hw, params=params)["time_s"])


def test_the_pre_hopper_build_pays_its_own_cta_cost() -> None:
    more = replace(DEFAULT_PARAMS, trtllm=replace(DEFAULT_PARAMS.trtllm, sm80_wo_cta_ns=5000.0))
    assert _gemv_s(L40S, more) > _gemv_s(L40S)
    assert _gemv_s(H200, more) == _gemv_s(H200)


def test_the_engine_files_fixed_choice_builds_for_the_architecture() -> None:
    from mpsim.library import ARCH_CONFIGS
    from mpsim.library.trtllm import engine_config
    from mpsim.sim.best_config import fixed_config

    assert engine_config(2, 4096, 4096, 4, 142, "ada").block_n == 32          # the GEMV, interleaved
    assert engine_config(2, 4096, 4096, 4, 132, "hopper").block_n == 8
    ada = engine_config(64, 4096, 4096, 4, 142, "ada")                        # a CUTLASS 2 tile
    assert ada.kernel == TRTLLM_FPAINTB and dict(ada.extra).get("sm80") == 1
    assert "sm80" not in dict(engine_config(64, 4096, 4096, 4, 132, "hopper").extra)
    assert ARCH_CONFIGS[TRTLLM_FPAINTB](TRTLLM_FPAINTB, 64, 4096, 4096, 4, None, 142, "ada") == ada
    assert fixed_config(TRTLLM_FPAINTB, 64, 4096, 4096, None, L40S, 4) == ada
