"""The GPU generation each hardware file gets and the GEMM candidate family it runs
(mpsim/sim/gpu/arch.py): an explicit table, Blackwell on Hopper's set as a labelled assumption."""

from __future__ import annotations

import dataclasses

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.kernels import launch_config as lc
from mpsim.sim.best_config import best_gemm_row, gemm_candidate_configs
from mpsim.sim.gpu.arch import CANDIDATE_FAMILY, candidate_family, generation


def gpu(name: str) -> GpuSpec:
    spec = load_hardware(name)
    assert isinstance(spec, GpuSpec)
    return spec


@pytest.mark.parametrize(("name", "gen", "family"), [
    ("a100-sxm-80gb", "ampere", "ampere"), ("l40s", "ampere", "ampere"), ("rtx-4090", "ampere", "ampere"),
    ("h100-sxm", "hopper", "hopper"), ("h200-sxm", "hopper", "hopper"),
    ("b200-sxm", "blackwell", "hopper"),
])
def test_every_shipped_gpu_has_its_generation_and_family(name: str, gen: str, family: str) -> None:
    assert (generation(gpu(name)), candidate_family(gpu(name))) == (gen, family)


def test_the_table_names_every_generation_and_only_known_families() -> None:
    assert set(CANDIDATE_FAMILY) == {"ampere", "hopper", "blackwell"}
    assert set(CANDIDATE_FAMILY.values()) <= set(lc.ARCHITECTURES)
    assert CANDIDATE_FAMILY["blackwell"] == "hopper"  # the labelled assumption (arch.py)


def test_generation_follows_the_tensor_rate_not_the_name() -> None:
    b200 = gpu("b200-sxm")
    rates = {**b200.tensor_core.flops_per_clock_per_SM, "fp16": 4096}
    hopper_like = dataclasses.replace(
        b200, tensor_core=dataclasses.replace(b200.tensor_core, flops_per_clock_per_SM=rates))
    assert generation(hopper_like) == "hopper"


def test_b200_autotunes_over_hoppers_tiles() -> None:
    b200, h200, l40s = gpu("b200-sxm"), gpu("h200-sxm"), gpu("l40s")
    shape = (2048, 4096, 4096, "fp16", 16, None)
    assert gemm_candidate_configs(*shape, hw=b200) == gemm_candidate_configs(*shape, hw=h200)
    assert gemm_candidate_configs(*shape, hw=b200) != gemm_candidate_configs(*shape, hw=l40s)
    best = best_gemm_row(2048, 4096, 4096, hw=b200)
    assert (best.config.block_m, best.config.block_n) in {(bm, bn) for bm, bn, *_ in lc.HOPPER_GEMM_TILES}
    assert 0 < best.predicted_s < best_gemm_row(2048, 4096, 4096, hw=h200).predicted_s


@pytest.mark.parametrize(("name", "arch"), [
    ("a100-sxm-80gb", "sm_80"), ("l40s", "sm_80"), ("rtx-4090", "sm_80"),
    ("h100-sxm", "sm_90a"), ("h200-sxm", "sm_90a"), ("b200-sxm", "sm_90a"),
])
def test_each_gpu_is_priced_from_its_architectures_sass_rows(name: str, arch: str) -> None:
    """Ampere and Ada from the sm_80 count, Hopper and (an assumption) Blackwell from sm_90a's."""
    from mpsim.sim.gpu.arch import sass_arch
    from mpsim.sim.gpu.rates import gpu_rates
    from mpsim.sim.params import DEFAULT_PARAMS

    assert sass_arch(gpu(name)) == arch == gpu_rates(gpu(name), DEFAULT_PARAMS).sass_arch


def test_the_sass_rows_differ_by_architecture_and_an_unknown_one_is_refused() -> None:
    from mpsim.sim.gpu.sass import per_weight_mix

    tile = ("gemv_group_kernel", 4, 1, 256, 32, 4)
    sm80, sm90 = per_weight_mix(*tile, arch="sm_80"), per_weight_mix(*tile, arch="sm_90a")
    assert sm80["alu"] > sm90["alu"]  # sm_80's one-row 4-bit loop: 2.42 ALU lanes/weight vs 1.98
    with pytest.raises(ValueError, match="sm_100"):
        per_weight_mix(*tile, arch="sm_100")
