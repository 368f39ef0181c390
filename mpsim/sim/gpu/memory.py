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


def replayed_kv_bytes(warm: bool, kv_bytes: float, r: GpuRates, p: SimParams) -> float:
    """Bytes of a KV cache that a back-to-back replay (`l2_warm`) finds in L2: a cyclic stream of
    one cache, so all of it or none (`replay_hits`' rule for one operand): on a partitioned L2 all
    within the usable share (l2_usable_fraction: the H200 decode rows keep 33.5 MB of a 60 MiB L2,
    not 67 MB), on an L2 of one partition (Ada) all up to `replay_l2_from` of its size, none from
    `replay_l2_to`, linear between (the L40S rows: KV caches of 72-96 MiB were priced +41..+49%
    slow as DRAM reads)."""
    return cyclic_hits(kv_bytes, r, p) if warm else 0.0


def cyclic_hits(span: float, r: GpuRates, p: SimParams) -> float:
    """Bytes of `span` bytes read again in the same order that the second pass finds in L2 (a
    cyclic stream of one operand): on a partitioned L2 all of it within the usable share, none
    beyond; on an L2 of one partition all up to `replay_l2_from` of its size, none from
    `replay_l2_to`, linear between (replayed_kv_bytes; SGLang's per-token quantizer's second read,
    mpsim/sim/gpu/library/call_quant.py)."""
    if r.l2_partitions != 1:
        return span if span <= usable_l2(r, p) else 0.0
    return _kept(span, span, r.l2_bytes * p.replay_l2_from, r.l2_bytes * p.replay_l2_to)


def _kept(own: float, span: float, usable: float, whole: float) -> float:
    """Bytes of an operand found in L2 when `span` bytes cycle between two of its uses: all of it
    up to `usable`, none from `whole`, linear between (a cyclic stream under LRU)."""
    if span <= usable:
        return own
    return own * max(0.0, whole - span) / (whole - usable) if whole > usable else 0.0


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



def replay_hits(copies: int, w_bytes: float, x_bytes: float, y_bytes: float, r: GpuRates,
                p: SimParams) -> tuple[float, float, float]:
    """(weight bytes, activation bytes found in L2; output bytes that stay there, not written to
    DRAM) of a GEMM launch that a measurement replays with `copies` copies of its weights
    (aiconfigurator's collectors, analysis/validation/weight_copies.py: each copy is its own Linear,
    all share one input tensor, and every call's output reuses the caching allocator's block; 0 =
    not a replay: nothing is found, as for a layer of a model's forward pass).

    An operand is found when the bytes touched between two of its uses fit in L2: for a weight copy
    the copies x weights plus the shared input and output (a cyclic stream), for the input or the
    output one call's bytes. A cyclic stream under LRU hits entirely or not at all, the share found
    falling linearly between two edges. An L2 of one partition (Ada, `l2.partitions` 1) keeps it
    up to `replay_l2_from` of its size, nothing from `replay_l2_to` (the L40S rows: a stream of
    exactly the L2's size is found); a partitioned one (A100, H100/H200, B200) from the usable
    share (size x l2_usable_fraction) to its size (the H200 rows: TRT-LLM 1.3.0rc20's copies
    cycling exactly its 60 MiB are not found, 20.6 us at M 7, N 12288, K 2560 against 10.4 priced
    as found). The output (written lines) has edges of its own on one partition (`replay_out_from`
    / `replay_out_to`); a partitioned L2 keeps none of it (its write rate shows no L2 edge).
    SimParams names the rows of each.
    """
    if copies <= 0:
        return 0.0, 0.0, 0.0
    if r.l2_partitions == 1:
        usable, whole = r.l2_bytes * p.replay_l2_from, r.l2_bytes * p.replay_l2_to
    else:
        usable, whole = usable_l2(r, p), r.l2_bytes

    def kept(own: float, others: float) -> float:
        return _kept(own, own + others, usable, whole)

    y_kept = _kept(y_bytes, y_bytes + w_bytes + x_bytes, r.l2_bytes * p.replay_out_from,
                   r.l2_bytes * p.replay_out_to) if r.l2_partitions == 1 else 0.0
    return (kept(w_bytes, (copies - 1) * w_bytes + x_bytes + y_bytes),
            kept(x_bytes, w_bytes + y_bytes), y_kept)
