"""fp8 GEMMs on Ada (sm_89, L40S): vLLM's CUTLASS 2.x dispatch read from its source, cuBLASLt's
SM89 tiles as TensorRT-LLM's fp8 rows run them, and the mma.sync work model (tiles padded to the
CTA tile, CTAs as many as shared memory allows, serial split-K, the c2x epilogue's cost and the
store cost of its output)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library import ARCH_CONFIGS
from mpsim.library.cublas import SMEM_PER_CTA_BY_ARCH
from mpsim.library.cutlass_fp8 import CUTLASS_FP8_GEMM, candidates, cutlass_fp8_sm89_heuristic
from mpsim.library.trtllm_fp8 import TRTLLM_FP8_GEMM, fp8_sm89_candidates, fp8_sm89_heuristic
from mpsim.sim.best_config import gemm_candidate_configs
from mpsim.sim.gpu.rates import bw_fraction
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS

L40S = load_hardware("l40s")


def _shape(m: int, n: int) -> tuple[int | None, ...]:
    c = cutlass_fp8_sm89_heuristic(m, n, 4096)
    return c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps


def test_vllm_sm89_dispatch_follows_its_source() -> None:
    """scaled_mm_c2x_sm89_fp8_dispatch.cuh: (token tile, weight tile, K tile, stages, warps) by the
    next power of two of M (at least 16) and of N; warps = ThreadblockShape / WarpShape."""
    assert _shape(1, 4096) == (16, 64, 128, 5, 2)       # M16, np2 <= 8192, warp 16x64x64
    assert _shape(16, 16384) == (16, 128, 64, 5, 2)     # M16, np2 <= 24576
    assert _shape(3, 20000) == (32, 64, 128, 5, 4)      # M16, above
    assert _shape(17, 16384) == (32, 128, 128, 4, 4)    # M32, np2 <= 16384, warp 32x64x64
    assert _shape(64, 8192) == (64, 64, 128, 5, 4)      # M64, np2 <= 8196
    assert _shape(100, 4096) == (64, 128, 128, 3, 4)    # M128, np2 <= 8192
    assert _shape(128, 32768) == (128, 64, 128, 3, 4)   # M128, above 16384
    assert _shape(256, 4096) == (64, 128, 128, 3, 4)    # M256, np2 <= 4096
    assert _shape(300, 8192) == (256, 128, 64, 3, 8)    # default, np2 <= 8192, warp 64x64x64
    assert _shape(8192, 16384) == (128, 128, 64, 5, 4)  # default, above
    cfg = cutlass_fp8_sm89_heuristic(300, 8192, 4096)
    extra = dict(cfg.extra)
    assert cfg.grid == (2 * 64,) and cfg.split_k == 1 and extra["sm"] == 89 and extra["swap_ab"] == 0
    assert (extra["warps_t"], extra["warps_w"]) == (4, 2)
    for m in (1, 17, 65, 200, 4097):  # every tile fits Ada's 99 KB per CTA (no fallback kernel)
        for n in (1024, 8192, 16384, 65536):
            c = cutlass_fp8_sm89_heuristic(m, n, 4096)
            assert (c.block_m + c.block_n) * c.block_k * c.num_stages <= SMEM_PER_CTA_BY_ARCH["ada"]


def test_ada_has_no_blockwise_or_fp4_kernels_of_these_libraries() -> None:
    assert candidates(CUTLASS_FP8_GEMM, 64, 4096, 4096, 142, "ampere")[0].extra == \
        cutlass_fp8_sm89_heuristic(64, 4096, 4096).extra
    with pytest.raises(ValueError, match="no blockwise fp8 kernel for sm_89"):
        candidates("cutlass_fp8_block_gemm", 64, 4096, 4096, 142, "ampere")
    for kernel in ("deepgemm_fp8_block_gemm", "flashinfer_nvfp4_gemm", "trtllm_nvfp4_gemm"):
        with pytest.raises(MpsimInputError, match="l40s"):
            gemm_candidate_configs(64, 4096, 4096, "fp8-block", 8, 128, L40S, kernel)


@pytest.mark.parametrize(("m", "n", "k"), [(1, 4096, 4096), (8, 256, 512), (64, 8192, 16384),
                                           (4096, 4096, 4096)])
def test_cublaslt_sm89_candidates_fit_and_split_as_cublas_does_on_ada(m: int, n: int, k: int) -> None:
    cands = fp8_sm89_candidates(m, n, k, 142)
    assert cands and gemm_candidate_configs(m, n, k, "fp8", 8, None, L40S, TRTLLM_FP8_GEMM) == cands
    for c in cands:
        extra = dict(c.extra)
        assert extra["swap_ab"] == 1 and extra["sm"] == 89 and c.num_stages >= 3
        assert (c.block_m + c.block_n) * c.block_k * c.num_stages <= 99 * 1024
        assert c.grid[0] == -(-m // c.block_m) * -(-n // c.block_n) * c.split_k
    splits = {c.split_k for c in cands}
    # cuBLAS's Ada rule: no split below M N K = 2^21 (unless K >= 10240), splits at M = 1
    assert 1 in splits
    if m > 1 and m * n * k < 2**21:
        assert splits == {1}
    if m == 1:
        assert len(splits) > 1
    assert ARCH_CONFIGS[TRTLLM_FP8_GEMM](TRTLLM_FP8_GEMM, m, n, k, 8, None, 142, "ada") == \
        fp8_sm89_heuristic(m, n, k, 142) in cands


def _us(m: int, n: int, k: int, kernel: str = CUTLASS_FP8_GEMM, params: object = DEFAULT_PARAMS,
        config: object = None) -> float:
    row = gemm_row(m, n, k, "fp8", 8, kernel=kernel, sms=142,
                   config=config or cutlass_fp8_sm89_heuristic(m, n, k))
    return float(price_launch(row, L40S, params=params)["time_s"]) * 1e6  # type: ignore[arg-type]


def test_a_partial_token_tile_runs_every_mma_of_the_tile() -> None:
    """mma.sync kernels are compiled per CTA tile: M = 1 and M = 16 run the same 16-token tiles."""
    t1, t16 = _us(1, 4096, 16384), _us(16, 4096, 16384)
    assert t1 == pytest.approx(t16, rel=0.01)
    assert json.loads(gemm_row(1, 4096, 16384, "fp8", 8, kernel=CUTLASS_FP8_GEMM, sms=142,
                               config=cutlass_fp8_sm89_heuristic(1, 4096, 16384))["config"])["block_m"] == 16


def test_the_c2x_epilogue_costs_per_output_of_each_tile() -> None:
    """`sm89_tile_ns` per 128 x 128 outputs of a tile, one tile at a time on each SM: M 4096, N 8192
    runs 1024 tiles of 256 x 128 (one CTA an SM, by registers), 7.2 tiles an SM on 142 SMs, each
    paying 2 x sm89_tile_ns: the launch grows by more than half of 8 waves' worth and never by more."""
    cutlass = DEFAULT_PARAMS.cutlass_fp8
    free = dataclasses.replace(DEFAULT_PARAMS, cutlass_fp8=dataclasses.replace(cutlass, sm89_tile_ns=0.0))
    extra = _us(4096, 8192, 1024) - _us(4096, 8192, 1024, params=free)
    waves = 8 * 2 * cutlass.sm89_tile_ns / 1e3
    assert 0.5 * waves < extra <= waves * (1 + 1e-9)


def _store_floor_us(m: int, n: int, cost: float) -> float:
    """The DRAM's time for an M x N 16-bit output at `cost` bytes a byte (achievable bandwidth, a
    written byte at 1 / dram_write_share read bytes)."""
    bw = L40S.dram_bandwidth_Bps() * bw_fraction(L40S, DEFAULT_PARAMS) * DEFAULT_PARAMS.dram_write_share
    return m * n * 2 * cost / bw * 1e6


def test_the_c2x_output_streams_to_dram_at_its_store_cost() -> None:
    """vLLM's c2x epilogue writes its output to DRAM at `sm89_store_cost` bytes a byte, even an
    output the 96 MB L2 could hold (M 2048 x N 16384, 67 MB, 4-warp 128 x 128 tiles): the launch
    takes at least that stream and the cost adds at least 90% of its extra bytes' time; cuBLASLt's
    SM89 tiles (TensorRT-LLM's fp8, store cost 0) run the same shape under that floor."""
    cost = DEFAULT_PARAMS.cutlass_fp8.sm89_store_cost
    plain = dataclasses.replace(DEFAULT_PARAMS, cutlass_fp8=dataclasses.replace(
        DEFAULT_PARAMS.cutlass_fp8, sm89_store_cost=0.0, sm89_store_cost_8warp=0.0))
    t, t0 = _us(2048, 16384, 32), _us(2048, 16384, 32, params=plain)
    assert cost > 1.0 and t >= _store_floor_us(2048, 16384, cost)
    assert t - t0 >= 0.9 * _store_floor_us(2048, 16384, cost - 1.0)
    trt = _us(2048, 16384, 32, kernel=TRTLLM_FP8_GEMM, config=fp8_sm89_heuristic(2048, 16384, 32))
    assert trt < _store_floor_us(2048, 16384, cost)


def test_the_8_warp_tile_pays_its_own_store_cost() -> None:
    """The 256 x 128 tile (8 warps, N 4097-8192 above M 256) at `sm89_store_cost_8warp`; the 4-warp
    128 x 128 tile of N 4096 at `sm89_store_cost`, under the 8-warp floor."""
    wide = DEFAULT_PARAMS.cutlass_fp8.sm89_store_cost_8warp
    assert cutlass_fp8_sm89_heuristic(4096, 8192, 32).num_warps == 8
    assert _us(4096, 8192, 32) >= _store_floor_us(4096, 8192, wide)
    narrow = _us(4096, 4096, 32)
    assert _store_floor_us(4096, 4096, DEFAULT_PARAMS.cutlass_fp8.sm89_store_cost) <= narrow
    assert narrow < _store_floor_us(4096, 4096, wide)


def test_cublaslt_split_k_slices_share_the_k_loop() -> None:
    """Serial split-K: each slice walks its share of K; at M = 1 two slices beat one whole-K tile."""
    base = [c for c in fp8_sm89_candidates(1, 1024, 16384, 142) if (c.block_m, c.block_n) == (32, 128)]
    one = next(c for c in base if c.split_k == 1)
    four = next(c for c in base if c.split_k == 4)
    shape = (1, 1024, 16384, TRTLLM_FP8_GEMM)
    assert _us(*shape, config=four) < _us(*shape, config=one)


@pytest.mark.parametrize(("engine", "kernel"), [("vllm", CUTLASS_FP8_GEMM), ("trtllm", TRTLLM_FP8_GEMM)])
@pytest.mark.parametrize(("arch", "sm"), [("ada", 89), ("hopper", None)])
def test_engine_fp8_rows_take_the_architectures_kernels(engine: str, kernel: str, arch: str,
                                                        sm: int | None) -> None:
    """`synth --engine vllm|trtllm --policy fp8 --hw l40s`: the fp8 GEMM rows are built with the
    sm_89 kernels (vLLM's c2x dispatch, cuBLASLt's SM89 tiles), on Hopper with the sm_90 ones."""
    from mpsim.engines import engine_target, model_heads
    from mpsim.engines.rows import as_engine
    from mpsim.models import get_model
    from mpsim.policy import parse_policy

    target = engine_target(engine, parse_policy("fp8"), model_heads(get_model("llama-3-8b").as_dict()),
                           arch=arch, sms=142 if arch == "ada" else 132)
    assert target is not None
    for m in (1, 200, 4096):
        row = as_engine(gemm_row(m, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM), target)
        assert row is not None and row["kernel"] == kernel
        cfg = row["config"] if isinstance(row["config"], dict) else json.loads(row["config"])
        assert cfg.get("sm") == sm
        if kernel == CUTLASS_FP8_GEMM and sm == 89:
            assert (cfg["block_m"], cfg["block_n"]) == _shape(m, 4096)[:2]


def test_vllms_triton_block_kernel_takes_its_default_config_on_ada_only() -> None:
    """w8a8_triton_block_scaled_mm's default (no tuned JSON): 64 tokens x 128 weight rows x 128 of K,
    2 stages, 4 warps laid 2 x 2 by Triton's warpsPerTileV2, the per-K-step promotion on."""
    from mpsim.library.triton_fp8 import TRITON_FP8_BLOCK_GEMM, candidates, warps_per_tile

    assert warps_per_tile(64, 128, 4) == (2, 2)
    assert warps_per_tile(16, 128, 4) == (1, 4)   # one 16-row slab: every warp along N
    assert warps_per_tile(128, 128, 8) == (4, 2)
    (cfg,) = gemm_candidate_configs(300, 4096, 4096, "fp8-block", 8, 128, L40S, TRITON_FP8_BLOCK_GEMM)
    extra = dict(cfg.extra)
    assert (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps) == (64, 128, 128, 2, 4)
    assert cfg.grid == (5 * 32,) and extra["promote"] == 1 and (extra["warps_t"], extra["warps_w"]) == (2, 2)
    with pytest.raises(ValueError, match="modelled on sm_89 only"):
        candidates(TRITON_FP8_BLOCK_GEMM, 64, 4096, 4096, 132, "hopper")


def test_the_promotion_costs_cuda_core_time_on_a_compute_bound_tile() -> None:
    from mpsim.library.triton_fp8 import TRITON_FP8_BLOCK_GEMM

    triton = DEFAULT_PARAMS.triton_fp8
    free = dataclasses.replace(DEFAULT_PARAMS, triton_fp8=dataclasses.replace(triton, promote_ops=0.0))

    def us(params: object) -> float:
        row = gemm_row(4096, 8192, 8192, "fp8-block", 8, kernel=TRITON_FP8_BLOCK_GEMM, sms=142)
        return float(price_launch(row, L40S, params=params)["time_s"]) * 1e6  # type: ignore[arg-type]

    assert us(DEFAULT_PARAMS) > 1.05 * us(free)


def test_op_prices_a_library_kernel_at_its_choice_for_the_device(capsys: pytest.CaptureFixture[str]) -> None:
    """`mpsim op gemm --kernel K --hw l40s` (no --config best) builds K's own choice for Ada (vLLM's
    sm89 dispatch), not its Hopper tile; a kernel the device does not run is one error."""
    from mpsim.cli import main

    args = ["op", "gemm", "--m", "64", "--n", "4096", "--k", "4096", "--w-format", "fp8", "--bits", "8",
            "--kernel", CUTLASS_FP8_GEMM]
    assert main([*args, "--hw", "l40s"]) == 0
    out = capsys.readouterr().out
    assert '"sm": 89' in out and '"block_k": 128' in out and '"block_m": 64' in out
    assert main([*args, "--hw", "h200-sxm"]) == 0
    assert '"sm": 89' not in capsys.readouterr().out
    block = ["op", "gemm", "--m", "64", "--n", "4096", "--k", "4096", "--w-format", "fp8-block",
             "--bits", "8", "--kernel", "triton_fp8_block_gemm", "--hw", "h200-sxm"]
    assert main(block) == 2
    assert "triton_fp8_block_gemm: modelled on sm_89 only" in capsys.readouterr().err


def test_a_replayed_quantizer_finds_its_input_in_adas_l2_only() -> None:
    """TensorRT-LLM's per-tensor quantizer (amax, quantize) before an fp8 GEMM: a collector's call
    reads the same 16-bit input every time, so on L40S's one-partition L2 both kernels find its
    29.4 MB (a 3584 x 4096 input; the quantized copy, a weight copy and the output pass between two
    reads) and read nothing of it from DRAM; outside a replay, or on H200's partitioned L2 (the
    docstring of `source_hits` names the rows), all of it comes from DRAM."""
    from mpsim.library.scaled_gemm import QUANT_TENSOR_TRT, with_call
    from mpsim.sim.gpu.library.call_quant import quant_parts
    from mpsim.sim.gpu.library.scaled_gemm import source_hits
    from mpsim.sim.gpu.rates import gpu_rates

    m, n, k = 3584, 32, 4096
    src = m * k * 2
    cfg0 = fp8_sm89_heuristic(m, n, k)
    row = gemm_row(m, n, k, "fp8", 8, kernel=TRTLLM_FP8_GEMM, config=cfg0)
    for hw, copies, found in ((L40S, 5, src), (L40S, 0, 0), (load_hardware("h200-sxm"), 5, 0)):
        r = gpu_rates(hw, DEFAULT_PARAMS)
        cfg = json.loads(gemm_row(m, n, k, "fp8", 8, kernel=TRTLLM_FP8_GEMM,
                                  config=with_call(cfg0, QUANT_TENSOR_TRT, copies))["config"])
        assert source_hits(row, cfg, r, DEFAULT_PARAMS) == found
        parts = quant_parts(row, cfg, r, DEFAULT_PARAMS.fp8_act, found)
        assert [p.work.dram_read_bytes for p in parts] == [src - found] * 2
        assert [p.work.trip.load_bytes * p.work.total_ctas for p in parts] == pytest.approx([src] * 2)
    # an input larger than the L2 is not found (the stream between two reads overflows it)
    big = gemm_row(16384, n, k, "fp8", 8, kernel=TRTLLM_FP8_GEMM, config=cfg0)
    cfg = json.loads(gemm_row(16384, n, k, "fp8", 8, kernel=TRTLLM_FP8_GEMM,
                              config=with_call(cfg0, QUANT_TENSOR_TRT, 5))["config"])
    assert source_hits(big, cfg, gpu_rates(L40S, DEFAULT_PARAMS), DEFAULT_PARAMS) == 0
