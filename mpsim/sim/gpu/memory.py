"""The L2 model: which tile re-reads hit in L2 and which go to HBM, and cross-kernel residency.

Every tile a CTA loads passes through L2. The first touch of a byte is a miss (compulsory, the
trace's analytic bytes). A re-read hits when the data is still resident: re-reads by CTAs of the
same wave are concurrent and hit; re-reads in later waves hit only if what the launch touches in
between fits in the usable L2 (size x `l2_usable_fraction`), else they miss. The previous launch's
output is resident up to the usable L2 size, so the activation input that the next launch reads
first is (partly) served from L2: `residency_credit`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mpsim.sim.gpu.rates import GpuRates

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


def usable_l2(r: GpuRates, p: SimParams) -> float:
    return r.l2_bytes * p.l2_usable_fraction


def residency_credit(resident: float, input_bytes: float) -> float:
    """Bytes of a launch's activation input still in L2 from the launch before."""
    return max(0.0, min(resident, input_bytes))


def gemm_dram_reads(a_bytes: float, w_bytes: float, m_tiles: int, n_tiles: int, slots: int,
                    l2: float, group_m: int) -> float:
    """DRAM reads of a tiled GEMM with grouped tile order (bands of group_m output row tiles, the
    launch config's group_m).

    Inside a band, the group_m CTAs of one W column are consecutive, so they share W tiles
    concurrently (hits). A later band re-reads all of W: a hit only if A and W fit in L2 together.
    The band's A rows are re-read by every column of the band: hits if that A panel fits in half
    the L2 (the other half streams W); otherwise each wave of the band reads it again.
    """
    bands = math.ceil(m_tiles / group_m)
    w_reads = w_bytes * (1 if a_bytes + w_bytes <= l2 else bands)
    band_rows = min(m_tiles, group_m)
    a_band = a_bytes * band_rows / m_tiles
    waves_per_band = math.ceil(band_rows * n_tiles / slots)
    a_reads = a_bytes * (1 if a_band <= l2 / 2 else waves_per_band)
    return w_reads + a_reads


def prefill_kv_extra_reads(tile_kv_bytes: float, kv_bytes: float, kv_head_bytes: float,
                           heads_per_wave: float, l2: float) -> float:
    """K/V re-reads of causal prefill that miss: query tiles of one head re-read its K/V; they hit
    while the K/V of the heads in flight in one wave fit in L2, a share l2/working-set otherwise."""
    rereads = max(0.0, tile_kv_bytes - kv_bytes)
    working_set = heads_per_wave * kv_head_bytes
    if working_set <= l2:
        return 0.0
    return rereads * (1 - l2 / working_set)
