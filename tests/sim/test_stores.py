"""Stores (docs/validation.md#gemm-outputs-stop-47): a DRAM write costs 1 / dram_write_share read
bytes, a replayed output kept in a one-partition L2 takes the chip's L2 at its write rate, a
persistent CTA stores inside its loop, and a launch timed once ends with its output in L2."""

from __future__ import annotations

import json

import pytest
import simpy

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import gemm_row
from mpsim.library import cublas
from mpsim.sim.gpu.library.cublas import cublas_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.launch import price_launch, simulate_launch
from mpsim.sim.params import DEFAULT_PARAMS as P
from mpsim.sim.roofline import launch_roofline
from mpsim.sim.units import Memory

H200: GpuSpec = load_hardware("h200-sxm")  # type: ignore[assignment]
L40S: GpuSpec = load_hardware("l40s")  # type: ignore[assignment]


def test_a_written_byte_takes_write_cost_read_bytes() -> None:
    env = simpy.Environment()
    mem = Memory(env, "dram", 10.0, 0.0, write_cost=1.25)
    env.process(mem.transfer(100.0, 40.0))
    env.run()
    assert env.now == pytest.approx((100.0 + 40.0 * 1.25) / 10.0) and mem.bytes == 140.0
    assert gpu_rates(H200, P).dram_write_cost == pytest.approx(1 / P.dram_write_share)


def test_an_output_bound_gemm_streams_at_the_write_share() -> None:
    """16384 x 16384 x 32 on H200: 537 MB stored, 2 MB read; the time is the write stream's
    (0.82 x 0.80 of 4.8 TB/s) within the stream-K CTAs' fill and drain."""
    cfg = cublas.cublas_heuristic(16384, 16384, 32, 132)
    row = gemm_row(16384, 16384, 32, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=132)
    out = simulate_launch(row, H200, P)
    r = gpu_rates(H200, P)
    stream_s = 16384 * 16384 * 2 / (r.dram_Bpc * r.clock_hz * P.dram_write_share)
    t = out.cycles / out.clock_hz
    assert stream_s < t < 1.05 * stream_s


def test_stores_kept_in_a_one_partition_l2_take_its_write_rate() -> None:
    """A replayed 32 MiB output on L40S stays in L2 (kept share 1) and its stores are the chip L2's;
    a 160 MiB one goes to DRAM (kept share 0); nothing is kept on a partitioned L2."""
    def ada_row(m: int, n: int, k: int) -> dict[str, object]:
        cfg = cublas.cublas_heuristic(m, n, k, 142, "ampere", cublas.SMEM_PER_CTA_BY_ARCH["ada"])
        row = gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=142)
        return {**row, "config": json.dumps({**json.loads(row["config"]), "w_copies": 5})}

    def work(hw: GpuSpec, m: int, n: int, k: int, sms: int):  # type: ignore[no-untyped-def]
        row = ada_row(m, n, k) if hw is L40S else gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, sms=sms)
        cfg = {**json.loads(str(row["config"])), "w_copies": 5}
        return cublas_work(row, cfg, json.loads(str(row["grid"])), gpu_rates(hw, P), P, 0.0)[0].work

    assert work(L40S, 4096, 4096, 32, 142).l2_kept_stores == 1.0
    assert work(L40S, 8192, 10240, 32, 142).l2_kept_stores == 0.0
    assert work(H200, 4096, 4096, 32, 132).l2_kept_stores == 0.0
    kept = work(L40S, 4096, 4096, 32, 142)
    assert kept.written_bytes == 0.0                        # no DRAM write for a kept output
    # its stores take the chip's L2 (4096 x 4096 x 2 bytes at 0.70 of 13.6 B/clk/SM x 142 SMs)
    r = gpu_rates(L40S, P)
    out = simulate_launch(ada_row(4096, 4096, 32), L40S, P)
    assert out.cycles > 4096 * 4096 * 2 / (r.l2_Bpc * P.l2_write_share)


def test_a_launch_timed_once_leaves_its_output_in_l2() -> None:
    """TensorRT's profiler times a launch once: up to the usable L2 of its output is never written
    to DRAM while timed, in the simulator and in the bound it is checked against."""
    row = gemm_row(8192, 8192, 64, kernel=cublas.CUBLAS_GEMM, sms=142)  # 134 MB of output
    once = {**row, "config": json.dumps({**json.loads(row["config"]), "one_run": 1})}
    replayed, timed_once = simulate_launch(row, L40S, P), simulate_launch(once, L40S, P)
    usable = L40S.l2.size_MiB * 2**20 * P.l2_usable_fraction
    assert replayed.bytes_dram - timed_once.bytes_dram == pytest.approx(usable, rel=1e-6)
    bound = launch_roofline(once, L40S, resident=True)["t_mem_s"]
    plain = launch_roofline(row, L40S, resident=True)["t_mem_s"]
    assert bound < plain
    priced = price_launch(once, L40S)                     # no BelowBoundError
    assert priced["kernel_s"] >= bound


def test_the_one_run_credit_is_the_same_vectorized() -> None:
    import pandas as pd

    from mpsim.sim.roofline import roofline

    row = gemm_row(8192, 8192, 64, kernel=cublas.CUBLAS_GEMM, sms=142)
    once = {**row, "config": json.dumps({**json.loads(row["config"]), "one_run": 1})}
    alone = roofline(pd.DataFrame([once]), L40S, resident=True)["t_mem_s"].iloc[0]
    assert alone == pytest.approx(launch_roofline(once, L40S, resident=True)["t_mem_s"])
    assert alone < roofline(pd.DataFrame([row]), L40S, resident=True)["t_mem_s"].iloc[0]


def test_a_launchs_kernel_reads_what_the_previous_one_wrote_from_l2() -> None:
    """A launch of two kernels (a preprocessing kernel writing Q/K/V, then the attention reading them):
    the second finds up to the usable L2 of the first's output there, not in DRAM."""
    from mpsim.sim.gpu.model import _run
    from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
    from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, Trip

    r = gpu_rates(L40S, P)
    res = CtaResources(4, 16384, 0.0, 2, 64)
    occ = Occupancy(1, 2, False, "kernel")

    def part(reads: float, writes: float) -> KernelPart:
        trip = Trip(load_bytes=max(reads, 1.0) / (142 * 8), mma_flops=0.0)
        work = KernelWork(trip, Epilogue(writes / 142), (8,), "single", 142, 142, res, reads,
                          dram_write_bytes=writes)
        return KernelPart(work, occ)

    row = {"config": "{}", "grid": "[142]", "kernel": "x"}
    alone = _run([part(30e6, 0.0)], r, P, row)
    after = _run([part(0.0, 30e6), part(30e6, 0.0)], r, P, row)
    first = _run([part(0.0, 30e6)], r, P, row)
    assert alone.bytes_dram == 30e6 and after.bytes_dram == first.bytes_dram == 30e6  # no re-read
    usable = L40S.l2.size_MiB * 2**20 * P.l2_usable_fraction
    big = _run([part(0.0, 120e6), part(120e6, 0.0)], r, P, row)
    assert big.bytes_dram == pytest.approx(120e6 + 120e6 - usable)


def test_a_launch_timed_once_holds_at_most_one_usable_l2_over_its_kernels() -> None:
    from mpsim.sim.gpu.model import _run
    from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
    from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, Trip

    r = gpu_rates(L40S, P)
    res = CtaResources(4, 16384, 0.0, 2, 64)

    def writer(nbytes: float) -> KernelPart:
        work = KernelWork(Trip(load_bytes=1.0, mma_flops=0.0), Epilogue(nbytes / 142), (4,), "single",
                          142, 142, res, 0.0, dram_write_bytes=nbytes)
        return KernelPart(work, Occupancy(1, 2, False, "kernel"))

    usable = L40S.l2.size_MiB * 2**20 * P.l2_usable_fraction
    once = {"config": '{"one_run": 1}', "grid": "[142]", "kernel": "x"}
    out = _run([writer(60e6), writer(60e6)], r, P, once)
    assert out.bytes_dram == pytest.approx(120e6 - usable)
