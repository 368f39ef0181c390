"""Blackwell's L2 port for TMA copies (SimParams.port_bytes_per_clk_blackwell), the block-scaled
fp4 MMAs' share of the fp4 rate (SimParams.fp4_mma_eta) and the tiles the two nvfp4 kernels run:
TensorRT-LLM's untuned default config, FlashInfer's persistent CuTe DSL tiles."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import gemm_row
from mpsim.library.flashinfer_gemm import nvfp4_candidates
from mpsim.library.scaled_gemm import SCHED_PERSISTENT
from mpsim.library.trtllm_fp8 import TRTLLM_NVFP4_GEMM, candidates, nvfp4_default_config
from mpsim.sim.gpu.rates import gpu_rates, port_bytes_per_clk, port_rate
from mpsim.sim.gpu.work import Trip
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS

P = DEFAULT_PARAMS


def _gpu(name: str) -> GpuSpec:
    return load_hardware(name)  # type: ignore[return-value]


@pytest.mark.parametrize(("name", "port"), [("b200-sxm", P.port_bytes_per_clk_blackwell),
                                            ("h200-sxm", P.port_bytes_per_clk_hopper),
                                            ("h100-sxm", P.port_bytes_per_clk_hopper),
                                            ("a100-sxm-80gb", P.port_bytes_per_clk)])
def test_the_tma_port_is_the_generations_and_the_rest_h200s(name: str, port: float) -> None:
    hw = _gpu(name)
    r = gpu_rates(hw, P)
    ds = hw.tensor_core.datasheet_clock_MHz * 1e6
    assert port_bytes_per_clk(hw, P) == port
    assert r.port_Bpc * r.clock_hz == pytest.approx(port * ds)   # bytes per second, whatever the clock
    # thread loads (LDG, cp.async) and the chip's L2 keep H200's port on every generation
    assert r.thread_port_Bpc * r.clock_hz == pytest.approx(P.port_bytes_per_clk * ds)
    assert r.l2_Bpc == pytest.approx(r.thread_port_Bpc * r.sms)
    assert port_rate(Trip(1.0, 0.0, bulk=True), r) == r.port_Bpc
    assert port_rate(Trip(1.0, 0.0), r) == r.thread_port_Bpc


def test_tma_kernels_take_the_bulk_port_and_thread_loaders_do_not() -> None:
    """cuBLAS and CUTLASS from Hopper on, trtllm-gen and FA3 load by TMA; cuBLAS's SM80 kernels
    (cp.async) and TensorRT-LLM's MMHA (LDG) by threads: on B200 only the first run at its wider port."""
    from mpsim.launch_plan import attention_row
    from mpsim.library.cublas import cublas_heuristic
    from mpsim.sim.gpu.model import launch_work

    b200 = _gpu("b200-sxm")
    r = gpu_rates(b200, P)

    def trips(row: dict) -> list[bool]:
        return [part.work.trip.bulk for part in launch_work(row, r, P, 0.0)]

    gemm = gemm_row(64, 4096, 4096, "fp16", 16, kernel="cublas_gemm",
                    config=cublas_heuristic(64, 4096, 4096, 148, "blackwell"))
    assert trips(gemm)[0]
    sm80 = gemm_row(64, 4096, 4096, "fp16", 16, kernel="cublas_gemm",
                    config=cublas_heuristic(64, 4096, 4096, 142, "ampere"))
    assert not trips(sm80)[0]
    fp4 = gemm_row(64, 4096, 4096, "nvfp4", 4, kernel=TRTLLM_NVFP4_GEMM)
    assert trips(fp4)[-1]
    tg = attention_row(8, 1, 1024, 32, 8, 128, 16, kernel="flashinfer_trtllm", sms=148)
    mmha = attention_row(8, 1, 1024, 96, 1, 64, 16, kernel="trtllm", sms=132)
    assert (tg["kernel"], mmha["kernel"]) == (
        "flashinfer_trtllm_decode", "trtllm_mmha_decode")
    assert trips(tg)[-1] and not trips(mmha)[-1]


def test_blackwells_port_is_its_own_constant() -> None:
    b200, h200 = _gpu("b200-sxm"), _gpu("h200-sxm")
    wider = replace(P, port_bytes_per_clk_blackwell=2 * P.port_bytes_per_clk_blackwell)
    assert gpu_rates(b200, wider).port_Bpc == pytest.approx(2 * gpu_rates(b200, P).port_Bpc)
    assert gpu_rates(h200, wider).port_Bpc == gpu_rates(h200, P).port_Bpc


@pytest.mark.parametrize("m", [1, 16, 200, 4096])
def test_trtllm_nvfp4_runs_its_untuned_default_tile_at_every_shape(m: int) -> None:
    """getDefaultGemmConfig on sm_100: CtaShape128x256x128B, 1x1x1 cluster, tokens on CUTLASS's M."""
    (cfg,) = candidates(TRTLLM_NVFP4_GEMM, m, 8192, 4096, 148, "blackwell")
    assert cfg == nvfp4_default_config(m, 8192, 148)
    extra = dict(cfg.extra)
    assert (cfg.block_m, cfg.block_n, cfg.block_k) == (128, 256, 256)
    assert (extra["pair"], extra["umma"], extra["sched"]) == (0, 1, SCHED_PERSISTENT)
    assert cfg.grid == (min(148, -(-m // 128) * 32),)
    row = gemm_row(m, 8192, 4096, "nvfp4", 4, kernel=TRTLLM_NVFP4_GEMM)
    assert json.loads(row["config"])["block_n"] == 256


def test_trtllm_nvfp4_time_follows_k_not_m_within_one_token_tile() -> None:
    """The B200 rows: at M <= 128 the time is the same for every M and grows with K (one tile's
    K loop per CTA, as many CTAs as weight tiles)."""
    b200 = _gpu("b200-sxm")

    def time(m: int, k: int) -> float:
        return float(price_launch(gemm_row(m, 8192, k, "nvfp4", 4, kernel=TRTLLM_NVFP4_GEMM), b200)["time_s"])

    assert time(1, 8192) == time(128, 8192)
    t = [time(4, k) for k in (2048, 4096, 8192, 16384)]
    steps = [b - a for a, b in itertools.pairwise(t)]
    assert all(s > 0 for s in steps)
    assert steps[2] == pytest.approx(2 * steps[1], rel=0.15)  # linear in K once the loop dominates


def test_the_fp4_share_slows_only_fp4_mmas() -> None:
    b200 = _gpu("b200-sxm")
    full = replace(P, fp4_mma_eta=1.0)
    # 64 CTAs of 128 x 256: each SM's MMAs bound it (a full chip is bound by the chip's L2 instead)
    fp4 = gemm_row(256, 8192, 8192, "nvfp4", 4, kernel=TRTLLM_NVFP4_GEMM)
    fp8 = gemm_row(256, 8192, 8192, "fp8", 8, kernel="trtllm_fp8_gemm")
    slow, fast = (price_launch(fp4, b200, params=q)["time_s"] for q in (P, full))
    assert slow > 1.3 * fast
    assert price_launch(fp8, b200, params=full)["time_s"] == price_launch(fp8, b200)["time_s"]


def test_flashinfer_nvfp4_tiles_are_persistent_only() -> None:
    """FlashInfer's CuTe DSL block-scaled GEMM is CUTLASS's persistent kernel: no stream-K."""
    cfgs = nvfp4_candidates(64, 8192, 8192, 148)
    assert cfgs and {dict(c.extra)["sched"] for c in cfgs} == {SCHED_PERSISTENT}
