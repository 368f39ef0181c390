"""The GPU model's shared memory of the pipelined one-row GEMVs (mpsim/sim/gpu/library/mpsim_gemm.py):
loop_stages - 1 loop iterations of T tiles staged, any-precision's pair-table words counted, as the
compiled kernels allocate (Triton 3.9: fp16 64 x 64 at 3 stages 16 640 B; int4 256 x 32 at 3 stages
33 280 B; any-precision 3-bit 256 x 32 at 2 stages 78 080 B, at 3 stages 156 160 B), except on
Hopper and later, where the any-precision partial sums prefetch their next run in registers (1 024 B
compiled, the split-K reduction's; 255 registers)."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import loop_stages_of, one_row_stages, prefetched_in_registers
from mpsim.launch_plan import gemm_row
from mpsim.sim.gpu.library.mpsim_gemm import gemm_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS


@pytest.mark.parametrize(("fmt", "bits", "compiled", "hw_name"), [
    ("fp16", 16, 16_640, "h200-sxm"), ("group", 4, 33_280, "h200-sxm"),
    ("anyprec", 3, 78_080, "a100-sxm-80gb")])
def test_staged_bytes_match_the_compiled_kernels(fmt: str, bits: int, compiled: int,
                                                 hw_name: str) -> None:
    hw = load_hardware(hw_name)
    row = gemm_row(1, 4096, 4096, fmt, bits)
    cfg = json.loads(str(row["config"]))
    assert cfg["loop_stages"] == one_row_stages("anyprec" if fmt == "anyprec" else fmt, bits)
    grid = json.loads(str(row["grid"]))
    work, occ = gemm_work(row, cfg, grid, gpu_rates(hw, DEFAULT_PARAMS), DEFAULT_PARAMS,
                          0.0)
    smem = work.resources.stage_bytes * occ.stages + work.resources.fixed_smem
    assert smem == pytest.approx(compiled, rel=0.04)


def test_any_precision_partial_sums_run_two_stages() -> None:
    """Off Hopper, three of Triton's stages would hold 156 KB a CTA: above an Ada GPU's 99 KB per
    block (the model then clamps the pipeline); two fit."""
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


def test_hopper_prefetches_the_partial_sums_in_registers() -> None:
    """One run of T = 4 tiles ahead whatever depth the config asks, no shared memory, and the
    registers ptxas gives the loop (255: two CTAs an SM)."""
    assert prefetched_in_registers("anyprec", 3, 9) and prefetched_in_registers("anyprec", 2, None)
    assert not prefetched_in_registers("anyprec", 3, 8)  # Ampere and Ada keep Triton's stages
    assert not prefetched_in_registers("anyprec", 4, 9) and not prefetched_in_registers("group", 4, 9)
    assert prefetched_in_registers("group", 3, 8) and prefetched_in_registers("group", 2, 9)
    r = gpu_rates(load_hardware("h200-sxm"), DEFAULT_PARAMS)
    row = gemm_row(1, 4096, 11008, "anyprec", 3)
    grid = json.loads(str(row["grid"]))
    for depth in (2, 3):
        cfg = {**json.loads(str(row["config"])), "loop_stages": depth}
        work, occ = gemm_work(row, cfg, grid, r, DEFAULT_PARAMS, 0.0)
        assert work.resources.stage_bytes == 0.0 and not occ.stages_clamped
        assert occ.stages == 4 and work.resources.regs_per_thread == r.max_regs_per_thread
        assert occ.ctas_per_sm == 2, occ


@pytest.mark.parametrize(("hw_name", "ctas"), [("h200-sxm", 2), ("a100-sxm-80gb", 3)])
def test_group_partial_sums_prefetch_in_registers_on_every_gpu(hw_name: str, ctas: int) -> None:
    """2 and 3 bits (not 4): no shared memory, the compiled loop's registers (ptxas: 254 on sm_90a,
    168 on sm_80), so two CTAs an SM on Hopper and three on an A100."""
    r = gpu_rates(load_hardware(hw_name), DEFAULT_PARAMS)
    for bits, prefetched in ((3, True), (2, True), (4, False)):
        row = gemm_row(1, 4096, 11008, "group", bits)
        cfg = json.loads(str(row["config"]))
        work, occ = gemm_work(row, cfg, json.loads(str(row["grid"])), r, DEFAULT_PARAMS, 0.0)
        assert (work.resources.stage_bytes == 0.0) == prefetched, (hw_name, bits)
        if prefetched:
            assert occ.stages == 4 and occ.ctas_per_sm == ctas, (hw_name, bits, occ)
