"""A GPU hardware file and the simulator's constants turned into per-cycle rates at a running clock.

The SM clock of a launch is not fixed: it starts at the boost clock and the power limit pulls it
down while the tensor cores are busy (mpsim/sim/gpu/model.py). Rates on the SM side (tensor cores,
CUDA-core pipes, shared memory) are per SM clock; rates on the memory side (HBM, the L2 ports) are
fixed in bytes per second and converted to the running clock.

Per-device numbers come from the hardware file (datasheet numbers); the rest from SimParams
(device-independent). A hardware file may still carry the optional overrides
`dram.achievable_bandwidth_fraction`, `l2.bandwidth_GBps`, `l2.latency_ns`, `dram.latency_ns` and
`launch.overhead_us` (a calibration of one device's graph gap, mpsim/sim/protocols.py `for_device`);
the shipped files do not.
"""

# ruff: noqa: N815  (names carry their units, as the hardware files do)

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, UnsupportedDtypeError
from mpsim.sim.gpu.arch import SassArch, generation, sass_arch
from mpsim.sim.protocols import DEFAULT_PROTOCOL, Protocol, for_device

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.gpu.work import Trip
    from mpsim.sim.params import SimParams

# Issue rates per SM per clock, thread-instructions (lanes): CUDA C++ Programming Guide, "Arithmetic
# Instructions", throughput of native arithmetic instructions, compute capability 8.0-9.0:
# conversions ("all other type conversions") 16, MUFU functions (exp2, rcp, ...) 16; load/store:
# 4 SM sub-partitions x 8 LD/ST units (H100 and A100 whitepapers' SM diagrams); each of the 4 warp
# schedulers issues one warp instruction (32 lanes) per clock.
CVT_PER_CLK = 16.0
SFU_PER_CLK = 16.0
LSU_PER_CLK = 32.0
ISSUE_PER_CLK = 128.0


@dataclass(frozen=True)
class GpuRates:
    clock_hz: float          # the running SM clock (cycles are counted in it)
    boost_hz: float
    datasheet_hz: float      # the clock the datasheet's tensor peaks imply
    sms: int
    dram_Bpc: float          # achievable DRAM bytes per cycle, whole chip
    dram_peak_Bpc: float
    dram_write_cost: float   # a written DRAM byte's time in read bytes (SimParams.dram_write_share)
    l2_write_cost: float     # ... in a one-partition L2's chip server (SimParams.l2_write_share)
    dram_latency: float      # cycles
    load_latency: float      # cycles: a register load's round trip in an unpipelined loop
    l2_Bpc: float            # whole chip
    l2_latency: float        # cycles
    l2_bytes: float
    l2_partitions: int       # the hardware file's l2.partitions (None read as 2, partitioned)
    port_Bpc: float          # one SM's L2 port for TMA bulk copies (Trip.bulk)
    thread_port_Bpc: float   # ... for loads threads issue (LDG, cp.async): H200's port everywhere
    tma_edge_cost: float     # the chip's L2 load per byte of a TMA box beyond a tensor's edge (Hopper)
    smem_Bpc: float          # one SM's shared memory
    pipes: dict[str, float]  # lanes per cycle per SM: fp32, alu, cvt, sfu, lsu, issue
    tensor_fpc: dict[str, float]  # dense tensor FLOP per cycle per SM by dtype (architectural)
    # outside the kernels: the graph protocol on this device (protocols.py `for_device`). Only the
    # model's own loop sees it (the power-limited clock runs over back-to-back replays, the config
    # search ranks whole calls); simulate() sets every result's launch cost.
    launch_cost: Protocol
    floor_cycles: float      # the shortest kernel duration
    smem_bytes: float        # per SM
    smem_per_cta_bytes: float
    registers: int           # per SM
    max_regs_per_thread: int
    max_warps: int
    max_ctas: int
    sass_arch: SassArch      # the SASS table rows that price mpsim's kernels (arch.py SASS_ARCH)

    @property
    def fp32_lanes(self) -> float:
        return self.pipes["fp32"]

    def cycles(self, seconds: float) -> float:
        return seconds * self.clock_hz


class NoTensorRateError(UnsupportedDtypeError, MpsimInputError):
    """A launch asks for tensor cores of a dtype its device does not have (bad input, one line)."""


def tensor_rate(r: GpuRates, dtype: str) -> float:
    """Dense tensor FLOP per cycle per SM for `dtype` (fp16, bf16, fp8, fp4, ...); a device whose
    hardware file lists no tensor-core rate for it (fp8 before Ada/Hopper, fp4 before Blackwell) is
    an UnsupportedDtypeError naming the device's rates, never a fallback to another dtype's."""
    if dtype not in r.tensor_fpc:
        raise NoTensorRateError(f"no {dtype} tensor cores on this device (tensor rates for "
                                    f"{', '.join(sorted(r.tensor_fpc))})")
    return r.tensor_fpc[dtype]


def bw_fraction(hw: GpuSpec, p: SimParams) -> float:
    """The achievable HBM share: the file's override (a calibration) or the constant."""
    override = hw.dram.achievable_bandwidth_fraction
    return p.bw_frac if override is None else override


def port_bytes_per_clk(hw: GpuSpec, p: SimParams) -> float:
    """One SM's L2 port for TMA bulk copies at the datasheet tensor clock, by generation
    (arch.generation): `port_bytes_per_clk_blackwell`, `port_bytes_per_clk_hopper`, and
    `port_bytes_per_clk` (the chip's L2 share per SM) on the others, which issue no TMA copies;
    thread loads take `port_bytes_per_clk` everywhere."""
    gen = generation(hw)
    if gen == "blackwell":
        return p.port_bytes_per_clk_blackwell
    return p.port_bytes_per_clk_hopper if gen == "hopper" else p.port_bytes_per_clk


def port_rate(t: Trip, r: GpuRates) -> float:
    """The port a kernel's trip loads and epilogue stores take: TMA bulk copies (`Trip.bulk`) the
    generation's, thread loads and stores H200's (the same on every generation but Blackwell,
    whose TMA port is wider)."""
    return r.port_Bpc if t.bulk else r.thread_port_Bpc


def chip_l2_bytes_per_clk(hw: GpuSpec, p: SimParams, f: float) -> float:
    """The whole chip's L2 bytes per clock at `f`: SMs x `port_bytes_per_clk` (H200's port, on
    Blackwell too, whose own port is wider: SimParams.port_bytes_per_clk_blackwell), or for an L2
    of one partition (Ada) SMs x `l2_one_partition_bytes_per_clk` (both at the datasheet clock)."""
    per_sm = p.l2_one_partition_bytes_per_clk if hw.l2.partitions == 1 else p.port_bytes_per_clk
    return per_sm * hw.tensor_core.datasheet_clock_MHz * 1e6 / f * hw.compute_units


def gpu_rates(hw: GpuSpec, p: SimParams, clock_hz: float | None = None) -> GpuRates:
    """Rates at `clock_hz` (default the boost clock)."""
    boost = hw.compute.boost_clock_MHz * 1e6
    f = boost if clock_hz is None else clock_hz
    ds = hw.tensor_core.datasheet_clock_MHz * 1e6
    sms = hw.compute_units
    port = port_bytes_per_clk(hw, p) * ds / f
    l2_bps = hw.l2.bandwidth_GBps * 1e9 if hw.l2.bandwidth_GBps is not None else None
    l2_lat = hw.l2.latency_ns if hw.l2.latency_ns is not None else p.l2_latency_ns
    dram_lat = hw.dram.latency_ns if hw.dram.latency_ns is not None else p.dram_latency_ns
    overhead_us = hw.launch.overhead_us if hw.launch is not None else None
    cc = hw.cuda_core
    return GpuRates(
        clock_hz=f, boost_hz=boost, datasheet_hz=ds, sms=sms,
        dram_Bpc=hw.dram_bandwidth_Bps() * bw_fraction(hw, p) / f,
        dram_peak_Bpc=hw.dram_bandwidth_Bps() / f, dram_write_cost=1.0 / p.dram_write_share,
        l2_write_cost=1.0 / p.l2_write_share if hw.l2.partitions == 1 else 1.0,
        dram_latency=dram_lat * 1e-9 * f,
        load_latency=(hw.dram.load_latency_ns if hw.dram.load_latency_ns is not None
                      else p.load_latency_ns) * 1e-9 * f,
        l2_Bpc=l2_bps / f if l2_bps is not None else chip_l2_bytes_per_clk(hw, p, f),
        l2_latency=l2_lat * 1e-9 * f,
        l2_bytes=hw.l2.size_MiB * 2**20,
        l2_partitions=hw.l2.partitions if hw.l2.partitions is not None else 2,
        port_Bpc=port, tma_edge_cost=p.tma_edge_cost if generation(hw) == "hopper" else 0.0,
        thread_port_Bpc=p.port_bytes_per_clk * ds / f, smem_Bpc=p.smem_bytes_per_clk,
        pipes={"fp32": cc.fp32_flops_per_clock_per_SM / 2, "alu": cc.int32_ops_per_clock_per_SM,
               "cvt": CVT_PER_CLK, "sfu": SFU_PER_CLK, "lsu": LSU_PER_CLK, "issue": ISSUE_PER_CLK},
        tensor_fpc={k: v * p.eta_mma for k, v in hw.tensor_core.flops_per_clock_per_SM.items()},
        launch_cost=for_device(DEFAULT_PROTOCOL, overhead_us), floor_cycles=p.kernel_floor_us * 1e-6 * f,
        smem_bytes=hw.sm.shared_memory_KiB * 1024,
        smem_per_cta_bytes=hw.sm.max_shared_memory_per_cta_KiB * 1024,
        registers=hw.sm.registers_32bit, max_regs_per_thread=hw.sm.max_registers_per_thread,
        max_warps=hw.sm.max_warps, max_ctas=hw.sm.max_ctas, sass_arch=sass_arch(hw),
    )
