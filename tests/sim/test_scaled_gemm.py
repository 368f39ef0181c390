"""The fp8 / fp4 GEMM kernels (issue 26): bytes by format with their scales, the tensor rates a device
has (none refused silently), the libraries' own dispatch rules, and the work model's time growing
with every dimension of the GEMM and with the call's activation quantization."""

from __future__ import annotations

import itertools
import json

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import HardwareSpec, UnsupportedDtypeError
from mpsim.launch_plan import gemm_row
from mpsim.library.cutlass_fp8 import CUTLASS_FP8_GEMM, cutlass_fp8_heuristic
from mpsim.library.deepgemm import BLOCK_K, BLOCK_N_END, deepgemm_config, layouts
from mpsim.library.scaled_gemm import (
    QUANT_GROUP,
    QUANT_KERNELS,
    QUANT_NONE,
    QUANT_TENSOR_TRT,
    SCHED_PERSISTENT,
    scaled_config,
    with_call,
)
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.gpu.rates import NoTensorRateError, gpu_rates, tensor_rate
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.accounting import activation_bytes, launch_cost, weight_bytes

H200, B200, A100 = (load_hardware(n) for n in ("h200-sxm", "b200-sxm", "a100-sxm-80gb"))


def test_weight_bytes_carry_each_formats_scales() -> None:
    n, k = 4096, 1000
    assert weight_bytes(n, k, "fp8", 8, None) == n * k + 4                # one fp32 per tensor
    assert weight_bytes(n, k, "fp8", 8, 0) == n * k + 4 * n               # one per output row
    assert weight_bytes(n, k, "fp8-block", 8, 128) == n * k + 32 * 8 * 4  # 128x128 blocks
    assert weight_bytes(n, k, "nvfp4", 4, 16) == n * k // 2 + n * 63 + 4  # e4m3 per 16, fp32 tensor
    assert weight_bytes(n, k, "mxfp4", 4, 32) == n * k // 2 + n * 32      # e8m0 per 32


def test_activation_bytes_follow_a_dtype() -> None:
    assert activation_bytes(8, 1024, "bf16", "fp8") == 8 * 1024 * 2
    assert activation_bytes(8, 1024, "fp8-e4m3", "fp8") == 8 * 1024 + 8 * 4
    assert activation_bytes(8, 1024, "fp8-e4m3", "fp8-block") == 8 * 1024 + 8 * 8 * 4
    assert activation_bytes(8, 1024, "fp4-e2m1", "nvfp4") == 8 * 512 + 8 * 64 + 4
    row = gemm_row(8, 4096, 1024, "fp8-block", 8, kernel="deepgemm_fp8_block_gemm")
    assert row["a_dtype"] == "fp8-e4m3" and row["group_size"] == 128
    cost = launch_cost(row)
    assert cost.bytes_read == 8 * 1024 + 8 * 8 * 4 + 4096 * 1024 + 32 * 8 * 4
    assert cost.bytes_written == 8 * 4096 * 2 and cost.flops == 2 * 8 * 4096 * 1024


def test_rates_refuse_devices_without_fp8_or_fp4_tensor_cores() -> None:
    assert tensor_rate(gpu_rates(H200, DEFAULT_PARAMS), "fp8") == 8192 * DEFAULT_PARAMS.eta_mma
    assert tensor_rate(gpu_rates(B200, DEFAULT_PARAMS), "fp4") == 32768 * DEFAULT_PARAMS.eta_mma
    assert B200.matrix_peak_flops("fp4") == 9000e12
    with pytest.raises(NoTensorRateError, match="no fp8 tensor cores"):
        tensor_rate(gpu_rates(A100, DEFAULT_PARAMS), "fp8")
    with pytest.raises(NoTensorRateError, match="no fp4 tensor cores"):
        tensor_rate(gpu_rates(H200, DEFAULT_PARAMS), "fp4")
    with pytest.raises((MpsimInputError, UnsupportedDtypeError), match="fp8"):
        price_launch(gemm_row(16, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM), A100)
    with pytest.raises((MpsimInputError, UnsupportedDtypeError), match="fp4"):
        price_launch(gemm_row(16, 4096, 4096, "nvfp4", 4, kernel="flashinfer_nvfp4_gemm"), H200)


def test_rows_refuse_a_format_their_kernel_does_not_run() -> None:
    with pytest.raises(MpsimInputError, match="runs fp8-block weights, got fp8"):
        gemm_row(16, 4096, 4096, "fp8", 8, kernel="deepgemm_fp8_block_gemm")
    with pytest.raises(MpsimInputError, match="group_size 128, got 64"):
        gemm_row(16, 4096, 4096, "fp8-block", 8, 64, kernel="deepgemm_fp8_block_gemm")


def test_cutlass_fp8_follows_vllms_sm90_dispatch() -> None:
    def tile(m: int, n: int, k: int = 4096) -> tuple[int | None, int | None, int | None, int]:
        c = cutlass_fp8_heuristic(m, n, k)
        return c.block_m, c.block_n, c.block_k, dict(c.extra)["swap_ab"]

    assert tile(16, 4096) == (16, 64, 256, 1)
    assert tile(17, 1024) == (16, 64, 256, 1) and tile(17, 4096) == (64, 64, 256, 1)
    assert tile(100, 4096) == (64, 128, 128, 0)
    assert tile(8192, 4096, 6144) == (256, 128, 128, 0) and tile(8192, 4096, 4096) == (128, 128, 128, 0)


def test_deepgemm_layouts_follow_its_sm90_rules() -> None:
    for m_blk, n_blk, stages in layouts(1, 7168):
        assert n_blk <= BLOCK_N_END and not (m_blk > 128 and n_blk > 128) and stages >= 3
        if n_blk > BLOCK_K:
            assert n_blk % (n_blk - BLOCK_K) == 0 or BLOCK_K % (n_blk - BLOCK_K) == 0
    assert {b for b, _, _ in layouts(1, 4096)} == {16, 32, 64, 128, 256}
    assert {b for b, _, _ in layouts(33, 4096)} == {64, 128, 256}
    cfg = deepgemm_config(4096, 4096, 4096, 132)
    assert (cfg.block_m, cfg.block_n, cfg.grid) == (256, 128, (132,))


KERNELS = [("cutlass_fp8_gemm", "fp8", 8, H200, False),
           ("cutlass_fp8_block_gemm", "fp8-block", 8, H200, True),
           ("deepgemm_fp8_block_gemm", "fp8-block", 8, H200, True),
           ("flashinfer_fp8_block_gemm", "fp8-block", 8, H200, True),
           ("trtllm_fp8_gemm", "fp8", 8, H200, False),
           ("flashinfer_nvfp4_gemm", "nvfp4", 4, B200, False),
           ("trtllm_nvfp4_gemm", "nvfp4", 4, B200, False)]


@pytest.mark.parametrize(("kernel", "fmt", "bits", "hw", "promote"), KERNELS, ids=lambda v: str(v)[:24])
def test_time_grows_with_m_n_and_k_under_one_config(kernel: str, fmt: str, bits: int, hw: object,
                                                    promote: bool) -> None:
    def time(m: int, n: int, k: int) -> float:
        cfg = scaled_config(kernel, m, n, 64, 128, 128, SCHED_PERSISTENT, 132, promote=promote,
                            umma=fmt == "nvfp4")
        return float(price_launch(gemm_row(m, n, k, fmt, bits, kernel=kernel, config=cfg), hw)["time_s"])

    # within one token tile (same grid), and once every SM holds a tile: more M never costs less
    # (fewer tiles than SMs use fewer SMs' L2 ports, so a grid that grows may be faster)
    series = [[time(m, 4096, 4096) for m in (1, 16, 33, 64)],
              [time(m, 4096, 4096) for m in (2048, 4096, 8192)],
              [time(2048, n, 4096) for n in (4096, 8192, 16384)],
              [time(64, 4096, k) for k in (256, 1024, 4096, 16384)]]
    for times in series:
        assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(times)), times
        assert times[-1] > times[0]


def test_the_calls_activation_quantization_adds_its_kernels_and_time() -> None:
    base = cutlass_fp8_heuristic(512, 4096, 4096)
    plain = gemm_row(512, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM, config=base)
    assert launch_kernels(plain) == 1 and json.loads(plain["config"])["quant"] == QUANT_NONE
    t0 = price_launch(plain, H200)["time_s"]
    for quant in (QUANT_GROUP, QUANT_TENSOR_TRT):
        cfg = with_call(base, quant, 0)
        row = gemm_row(512, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM, config=cfg)
        assert launch_kernels(row) == 1 + QUANT_KERNELS[quant]
        assert price_launch(row, H200)["time_s"] > t0
    with pytest.raises(ValueError, match="activation quantization mode 9"):
        with_call(base, 9, 0)
    with pytest.raises(ValueError, match="weight copies -1"):
        with_call(base, QUANT_NONE, -1)


def test_vllms_per_token_quantizer_streams_rows_after_a_lone_rows_latency() -> None:
    """QUANT_TOKEN_VLLM: a lone row's latency (`vllm_row_ns`), then its rows at the round's rate
    (`vllm_round_cycles` plus `vllm_pass_cycles` a 2048-value pass at the boost clock, a round of
    SMs x 8 rows), a partial round costing its share; the other modes keep whole rounds from M = 1."""
    from mpsim.library.scaled_gemm import QUANT_ROWS_PER_SM, QUANT_TOKEN_VLLM
    from mpsim.sim.gpu.library.call_quant import quant_parts

    r, q = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS.fp8_act
    rows = r.sms * QUANT_ROWS_PER_SM[QUANT_TOKEN_VLLM]

    def latency(m: int, quant: int) -> float:
        (part,) = [p for p in quant_parts({"m": m, "n": 128, "k": 4096, "w_format": "fp8"},
                                          {"quant": quant}, r, q) if p.work.name == "act quant"]
        lat = part.work.trip.latency_ns
        assert lat is not None
        return lat

    round_ns = (q.vllm_round_cycles + 2 * q.vllm_pass_cycles) / r.boost_hz * 1e9  # K 4096: 2 passes
    assert latency(1, QUANT_TOKEN_VLLM) == pytest.approx(q.vllm_row_ns + round_ns / rows)
    assert latency(10 * rows, QUANT_TOKEN_VLLM) == pytest.approx(q.vllm_row_ns + 10 * round_ns)
    assert latency(1, QUANT_TENSOR_TRT) == pytest.approx(q.trt_round_ns)  # one whole round


def test_vllms_per_token_quantizer_steps_at_every_2048_values_of_k() -> None:
    """common.cu's 256-thread CTA reads a row 16 bytes a thread a pass: 2048 bf16 values, so the
    time a row is flat within a pass and steps by `vllm_pass_cycles` at K = 2049, 4097, ..."""
    from mpsim.library.scaled_gemm import QUANT_ROWS_PER_SM, QUANT_TOKEN_VLLM, QUANT_VLLM_PASS_VALUES
    from mpsim.sim.gpu.library.call_quant import quant_latency

    r, q = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS.fp8_act
    assert QUANT_VLLM_PASS_VALUES == 2048 and QUANT_ROWS_PER_SM[QUANT_TOKEN_VLLM] == 8  # 2048 threads / 256
    rounds = 100
    m = rounds * r.sms * QUANT_ROWS_PER_SM[QUANT_TOKEN_VLLM]
    lat = {k: quant_latency(QUANT_TOKEN_VLLM, m, k, q, r) for k in (128, 2048, 2049, 4096, 16384)}
    assert lat[128] == lat[2048] and lat[2049] == lat[4096]
    step = rounds * q.vllm_pass_cycles / r.boost_hz * 1e9
    assert lat[2049] - lat[2048] == pytest.approx(step)
    assert lat[16384] - lat[2048] == pytest.approx(7 * step)


def test_vllms_group_quantizer_rounds_over_sms_times_8_ctas_of_16_groups() -> None:
    """per_token_group_quant.cu: 16 threads a 128-value group, 16 groups a 256-thread CTA, 8 CTAs an
    SM: a round of `vllm_group_round_ns` covers SMs x 128 groups, whatever splits them into rows;
    fewer groups than a round still take one."""
    from mpsim.library.scaled_gemm import QUANT_GROUP_VLLM, QUANT_VLLM_GROUPS_PER_CTA
    from mpsim.sim.gpu.library.call_quant import quant_latency

    r, q = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS.fp8_act
    per_round = r.sms * 8 * QUANT_VLLM_GROUPS_PER_CTA
    assert quant_latency(QUANT_GROUP_VLLM, 1, 4096, q, r) == pytest.approx(q.vllm_group_round_ns)
    assert quant_latency(QUANT_GROUP_VLLM, 33 * per_round // 32, 4096, q, r) == pytest.approx(
        33 * q.vllm_group_round_ns)
    assert quant_latency(QUANT_GROUP_VLLM, 4096, 16384, q, r) == pytest.approx(
        quant_latency(QUANT_GROUP_VLLM, 16384, 4096, q, r))  # groups, not rows


def test_trtllms_1x128_quantizer_iterates_its_full_grid_of_warps() -> None:
    """fp8_quantize_1x128: SMs x 8 CTAs of 256 threads, one warp a group a grid-stride iteration;
    an iteration costs `trt_group_iter_ns` plus `trt_group_busy_ns` times the share of warps that
    load (a launch of a few groups pays the first alone)."""
    from mpsim.library.scaled_gemm import QUANT_GROUP_TRT, QUANT_ROWS_PER_SM
    from mpsim.sim.gpu.library.call_quant import quant_latency

    r, q = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS.fp8_act
    warps = r.sms * QUANT_ROWS_PER_SM[QUANT_GROUP_TRT]
    assert warps == 132 * 64
    iteration = q.trt_group_iter_ns + q.trt_group_busy_ns
    assert quant_latency(QUANT_GROUP_TRT, 3 * warps, 128, q, r) == pytest.approx(3 * iteration)
    assert quant_latency(QUANT_GROUP_TRT, 3 * warps + 1, 128, q, r) == pytest.approx(4 * iteration)
    assert quant_latency(QUANT_GROUP_TRT, 1, 4096, q, r) == pytest.approx(   # 32 groups, one iteration
        q.trt_group_iter_ns + 32 / warps * q.trt_group_busy_ns)


def test_vllms_quantizer_rows_go_as_sms_times_the_boost_clock() -> None:
    """vLLM's per-token round is counted in SM cycles at the boost clock: L40S (142 SMs, 2520 MHz)
    quantizes its rows at (132 x 1980) / (142 x 2520) of H200's time a row."""
    from mpsim.library.scaled_gemm import QUANT_TOKEN_VLLM
    from mpsim.sim.gpu.library.call_quant import quant_latency

    q = DEFAULT_PARAMS.fp8_act

    def per_row(hw: HardwareSpec) -> float:
        r = gpu_rates(hw, DEFAULT_PARAMS)
        lat = [quant_latency(QUANT_TOKEN_VLLM, m, 128, q, r) for m in (4096, 32768)]
        return (lat[1] - lat[0]) / (32768 - 4096)
    assert per_row(load_hardware("l40s")) / per_row(H200) == pytest.approx(132 * 1980 / (142 * 2520))


def test_trtllms_per_tensor_quantizer_runs_its_sources_grids() -> None:
    """cudaFp8Utils.cu's PER_TENSOR branch: the amax on 1024 CTAs of 1024 threads whatever the
    tensor (waves of the CTAs an SM holds by threads: 2 on H200, 1 on L40S), the quantize a round
    per grid-stride pass of 8 values a thread; fixed cost on the first kernel."""
    from mpsim.sim.gpu.library.call_quant import amax_latency, quant_latency, quant_parts

    q = DEFAULT_PARAMS.fp8_act
    h200, l40s = gpu_rates(H200, DEFAULT_PARAMS), gpu_rates(load_hardware("l40s"), DEFAULT_PARAMS)
    assert amax_latency(q, h200) == pytest.approx(4 * q.trt_round_ns)   # ceil(1024 / (132 x 2))
    assert amax_latency(q, l40s) == pytest.approx(8 * q.trt_round_ns)   # ceil(1024 / 142)
    passes = 32768 * 4096 / (h200.sms * h200.max_warps * 32 * 8)
    assert quant_latency(QUANT_TENSOR_TRT, 32768, 4096, q, h200) == pytest.approx(passes * q.trt_round_ns)
    assert quant_latency(QUANT_TENSOR_TRT, 1, 4096, q, h200) == pytest.approx(q.trt_round_ns)
    parts = quant_parts({"m": 1, "n": 128, "k": 128, "w_format": "fp8"}, {"quant": QUANT_TENSOR_TRT}, h200, q)
    assert [p.work.name for p in parts] == ["act amax", "act quant"]
    assert [p.work.fixed_ns for p in parts] == [q.trt_fixed_ns, 0.0]


def test_weights_a_benchmark_replays_from_l2_skip_dram() -> None:
    """A measured call's weight copies (`w_copies`) go through the replay rule cuBLAS's rows use
    (memory.py replay_hits): one 16.8 MB copy stays in H200's L2 between calls, six do not."""
    base = cutlass_fp8_heuristic(16, 4096, 4096)

    def priced(copies: int) -> dict[str, float]:
        row = gemm_row(16, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM,
                       config=with_call(base, QUANT_NONE, copies))
        return price_launch(row, H200)

    cold, one, six = priced(0), priced(1), priced(6)
    assert json.loads(gemm_row(16, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM,
                               config=with_call(base, QUANT_NONE, 0))["config"]).get("w_copies") is None
    assert one["bytes_dram"] < cold["bytes_dram"] - 4096 * 4096 * 0.99
    assert one["time_s"] < cold["time_s"]
    assert six["bytes_dram"] >= 4096 * 4096  # every weight byte streamed (the output may stay)


def test_the_roofline_prices_fp8_and_fp4_gemms_at_their_tensor_rate() -> None:
    from mpsim.launch_plan import framework_op_row
    from mpsim.library.vllm import VLLM_RMS_NORM
    from mpsim.sim.roofline import launch_roofline, roofline
    from mpsim.traces.trace import rows_to_frame

    fp8 = gemm_row(8192, 8192, 8192, "fp8", 8, kernel=CUTLASS_FP8_GEMM)
    fp4 = gemm_row(8192, 8192, 8192, "nvfp4", 4, kernel="flashinfer_nvfp4_gemm")
    assert launch_roofline(fp8, H200)["t_math_s"] == fp8["flops"] / H200.matrix_peak_flops("fp8")
    assert launch_roofline(fp4, B200)["t_math_s"] == fp4["flops"] / B200.matrix_peak_flops("fp4")
    frame = rows_to_frame([fp8, framework_op_row(VLLM_RMS_NORM, 16, 4096)])  # a_dtype <NA> on the norm
    assert frame["a_dtype"].isna().iloc[1]
    assert roofline(frame, H200)["t_math_s"].iloc[0] == launch_roofline(fp8, H200)["t_math_s"]


@pytest.mark.parametrize("hw", [H200, load_hardware("h100-sxm")], ids=["h200", "h100"])
@pytest.mark.parametrize(("n", "k"), [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)])
def test_trtllm_fp8_fixed_choice_tiles_tokens_by_m_and_halves_the_weight_time(hw: HardwareSpec, n: int,
                                                                              k: int) -> None:
    """The engine's fixed fp8 choice (no autotune) takes cuBLAS's Hopper token tile (the next power
    of two of M within 16..128) and, at M = 1, streams its 1-byte weight in less time than cuBLAS
    streams the same shape's 2-byte one (a 128-token tile there moved 128 activation rows per K step
    and left most SMs idle: slower than bf16 on qkv, o and down)."""
    from mpsim.library.cublas import CUBLAS_GEMM, cublas_heuristic
    from mpsim.library.trtllm_fp8 import TRTLLM_FP8_GEMM, fp8_heuristic

    for m, tile in ((1, 16), (16, 16), (17, 32), (64, 64), (200, 128), (8192, 128)):
        assert fp8_heuristic(m, n, 132).block_m == tile == cublas_heuristic(m, n, k, 132).block_m
    sms = hw.compute_units
    fp8 = gemm_row(1, n, k, "fp8", 8, kernel=TRTLLM_FP8_GEMM, sms=sms)
    bf16 = gemm_row(1, n, k, "fp16", 16, kernel=CUBLAS_GEMM, sms=sms)
    assert json.loads(fp8["config"])["block_m"] == 16
    assert price_launch(fp8, hw)["time_s"] < price_launch(bf16, hw)["time_s"]


def test_hopper_clusters_run_whole_pairs_of_token_tiles() -> None:
    """CUTLASS sizes a clustered grid in whole clusters (tile_scheduler_params.h): vLLM's sm90 fp8
    tiles above M = 128 (128 tokens, 2 x 1 clusters) run four token tiles at M = 257, so one row past
    256 costs about as much as M = 512; Blackwell's 2-SM pair (umma) keeps its count."""
    from mpsim.library.scaled_gemm import token_tiles

    assert [token_tiles(m, 128, True) for m in (1, 128, 129, 256, 257, 384, 385)] == [2, 2, 2, 2, 4, 4, 4]
    assert [token_tiles(m, 128, False) for m in (1, 129, 257)] == [1, 2, 3]
    assert token_tiles(257, 128, True, umma=True) == 3
    n, k = 4096, 4096
    assert cutlass_fp8_heuristic(257, n, k, 132).grid == (128,)  # 4 x 32 tiles, persistent
    assert cutlass_fp8_heuristic(256, n, k, 132).grid == (64,)

    def us(m: int) -> float:
        return float(price_launch(gemm_row(m, n, k, "fp8", 8, kernel=CUTLASS_FP8_GEMM), H200)["time_s"]) * 1e6

    t256, t257, t512 = us(256), us(257), us(512)
    assert t257 > 1.2 * t256 and t257 == pytest.approx(t512, rel=0.07)  # 13.5 -> 17.0 us (512: 16.0)


def test_the_simulators_bound_credits_a_replayed_scaled_gemm_as_cublas_rows() -> None:
    """A measured call's `w_copies` makes the simulators' roofline (resident) treat the launch as a
    replay, as cuBLAS's rows: up to an L2 of its bytes found there; the plain roofline is unchanged."""
    from mpsim.sim.roofline import launch_roofline

    base = cutlass_fp8_heuristic(16, 4096, 4096)
    rows = [gemm_row(16, 4096, 4096, "fp8", 8, kernel=CUTLASS_FP8_GEMM, config=with_call(base, QUANT_NONE, c))
            for c in (0, 6)]
    plain = [launch_roofline(r, H200)["t_mem_s"] for r in rows]
    resident = [launch_roofline(r, H200, resident=True)["t_mem_s"] for r in rows]
    assert plain[0] == plain[1] and resident[1] < resident[0] == plain[0]


def test_flashinfers_nvfp4_kernel_takes_its_own_fp4_share() -> None:
    """FlashinferGemmParams.fp4_mma_eta (its 2-SM tiles, fitted on vLLM's B200 rows) prices the
    FlashInfer nvfp4 kernel; SimParams.fp4_mma_eta (TensorRT-LLM's untuned tile) no longer moves it
    but still moves TensorRT-LLM's kernel."""
    from mpsim.library.flashinfer_gemm import FLASHINFER_NVFP4_GEMM
    from mpsim.library.trtllm_fp8 import TRTLLM_NVFP4_GEMM
    from mpsim.sim.params import with_params

    m, n, k = 4096, 8192, 8192

    def us(kernel: str, params: dict[str, float]) -> float:
        row = gemm_row(m, n, k, "nvfp4", 4, 16, kernel=kernel, sms=B200.compute_units)
        p = with_params(DEFAULT_PARAMS, params) if params else DEFAULT_PARAMS
        return float(price_launch(row, B200, params=p)["time_s"]) * 1e6

    own = DEFAULT_PARAMS.flashinfer_gemm.fp4_mma_eta
    assert own is not None and own > DEFAULT_PARAMS.fp4_mma_eta
    fi = us(FLASHINFER_NVFP4_GEMM, {})
    assert us(FLASHINFER_NVFP4_GEMM, {"fp4_mma_eta": 0.4}) == fi
    assert us(FLASHINFER_NVFP4_GEMM, {"flashinfer_gemm.fp4_mma_eta": DEFAULT_PARAMS.fp4_mma_eta}) > fi
    assert us(TRTLLM_NVFP4_GEMM, {"fp4_mma_eta": 0.4}) > us(TRTLLM_NVFP4_GEMM, {})
