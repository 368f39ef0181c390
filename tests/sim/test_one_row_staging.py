"""The GPU model's shared memory of the pipelined one-row GEMVs (mpsim/sim/gpu/library/mpsim_gemm.py):
loop_stages - 1 loop iterations of T tiles staged, any-precision's pair-table words counted, as the
compiled kernels allocate (sm_90a, Triton 3.9: fp16 64 x 64 at 3 stages 16 640 B; int4 256 x 32 at
3 stages 33 280 B; any-precision 3-bit 256 x 32 at 2 stages 78 080 B, at 3 stages 156 160 B)."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import loop_stages_of, one_row_stages
from mpsim.launch_plan import gemm_row
from mpsim.sim.gpu.library.mpsim_gemm import gemm_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS


@pytest.mark.parametrize(("fmt", "bits", "compiled"), [
    ("fp16", 16, 16_640), ("group", 4, 33_280), ("anyprec", 3, 78_080)])
def test_staged_bytes_match_the_compiled_kernels(fmt: str, bits: int, compiled: int) -> None:
    hw = load_hardware("h200-sxm")
    row = gemm_row(1, 4096, 4096, fmt, bits)
    cfg = json.loads(str(row["config"]))
    assert cfg["loop_stages"] == one_row_stages("anyprec" if fmt == "anyprec" else fmt, bits)
    grid = json.loads(str(row["grid"]))
    work, occ = gemm_work(row, cfg, grid, gpu_rates(hw, DEFAULT_PARAMS), DEFAULT_PARAMS,
                          0.0)
    smem = work.resources.stage_bytes * occ.stages + work.resources.fixed_smem
    assert smem == pytest.approx(compiled, rel=0.04)


def test_any_precision_partial_sums_run_two_stages() -> None:
    """Three stages would hold 156 KB a CTA: above an Ada GPU's 99 KB per block (the model then
    clamps the pipeline); two fit."""
    assert one_row_stages("anyprec", 4) == 3 and one_row_stages("group", 3) == 3
    hw = load_hardware("l40s")
    r = gpu_rates(hw, DEFAULT_PARAMS)
    row = gemm_row(1, 4096, 11008, "anyprec", 2)
    grid = json.loads(str(row["grid"]))
    for depth, clamped in ((2, False), (3, True)):
        cfg = {**json.loads(str(row["config"])), "loop_stages": depth}
        work, occ = gemm_work(row, cfg, grid, r, DEFAULT_PARAMS, 0.0)
        smem = work.resources.stage_bytes * work.resources.stages
        assert (smem > r.smem_per_cta_bytes) == clamped == occ.stages_clamped, depth
    assert json.loads(str(row["config"]))["loop_stages"] == 2
    assert loop_stages_of(()) == 0
