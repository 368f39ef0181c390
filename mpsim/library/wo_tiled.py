"""Config helpers the weight-only GEMM rooms share (trtllm's fpA_intB, marlin, machete, turbomind).

Every such kernel is a mixed-input tiled GEMM: a CTA owns a weight tile WT (output features) by a
token tile TT, walks K in trips of BK, loads the packed weights and the 16-bit activations, converts
the weights to fp16 in registers and feeds the tensor cores. A config is a LaunchConfig with
block_m = TT, block_n = WT, block_k = BK, num_stages, split_k and `sched` in `extra`:
SCHED_DP (one CTA per tile), SCHED_PERSISTENT (min(tiles, SMs) CTAs walk the tiles),
SCHED_STREAM_K (CUTLASS's stream-K scheduler, its Heuristic decomposition), SCHED_SPLIT_K
(split_k CTAs per tile, serial reduction). The work model is mpsim/sim/gpu/library/wo_tiled.py;
docs/kernels-weight-only.md gives every rule's source.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import Row, apply_config, check_kernel, gemm_shape

SCHED_DP, SCHED_PERSISTENT, SCHED_STREAM_K, SCHED_SPLIT_K = 0, 1, 2, 3
SM90_SMEM_BYTES = 232448          # cutlass::arch::sm90_smem_capacity_bytes (227 KiB)
WO_FORMATS = ("int4-group", "int8-group")


def tile_stages(wt: int, tt: int, bk: int, bits: int, smem: int, carve: int) -> int:
    """Pipeline stages that fit the shared memory left after `carve` bytes (CUTLASS
    StageCountAutoCarveout): a stage holds the packed weights, their scales and the activations."""
    stage = wt * bk * bits // 8 + tt * bk * 2 + wt * 2
    return max(2, (smem - carve) // stage)


def wo_config(kernel: str, m: int, n: int, k: int, bits: int, tt: int, wt: int, bk: int,
              stages: int, sched: int, threads: int, split_k: int = 1, sms: int = GPU_SMS,
              extra: tuple[tuple[str, int], ...] = ()) -> LaunchConfig:
    """One config of a weight-only GEMM kernel; the grid follows the schedule."""
    if bits not in (4, 8):
        raise ValueError(f"{kernel}: weight bits must be 4 or 8, got {bits}")
    tiles = cdiv(m, tt) * cdiv(n, wt)
    grid = {SCHED_DP: tiles, SCHED_PERSISTENT: min(tiles, sms), SCHED_STREAM_K: min(tiles * cdiv(k, bk), sms),
            SCHED_SPLIT_K: tiles * split_k}[sched]
    return LaunchConfig(kernel, (grid,), tt, wt, bk, threads // 32, stages, split_k,
                        extra=(("sched", sched), *extra))


def wave_pick(cands: Sequence[LaunchConfig], m: int, sms: int) -> LaunchConfig:
    """A fixed choice without a search: the smallest token tile that holds M (cutlass_heuristic.cpp:
    "keep small tile sizes when possible"), the largest one when none holds M (a prefill: every
    token tile re-reads the weights), and, among those, the fewest idle SMs in the last wave (its
    wave score), the wider weight tile on a tie."""
    fits = [c for c in cands if (c.block_m or 0) >= m]
    smallest = (min(c.block_m or 0 for c in fits) if fits
                else max(c.block_m or 0 for c in cands))
    fits = fits or list(cands)

    def score(c: LaunchConfig) -> tuple[float, int]:
        ctas = c.programs
        return cdiv(ctas, sms) - ctas / sms, -(c.block_n or 0)
    return min((c for c in fits if c.block_m == smallest), key=score)


def check_format(kernel: str, fmt: str) -> None:
    if fmt not in WO_FORMATS:
        raise ValueError(f"{kernel} prices int4/int8 weight-only GEMMs, got {fmt}")


def wo_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
           bias: bool, cfg: LaunchConfig) -> Row:
    """A weight-only GEMM row of `kernel` (int4/int8 weights; group 0 or None: per channel)."""
    check_format(kernel, fmt)
    check_kernel(cfg, kernel)
    group = k if group_size in (0, None) else group_size
    return apply_config(gemm_shape(m, n, k, fmt, bits, group, bias), cfg)
