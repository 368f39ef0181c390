"""The group formats' W_hat tile in a tl.dot operand's layout (2..16-row GEMVs, the tiled GEMM).

Each pair of codes is taken at its own bits by a broadcast shift vector, so Triton's layout pass carries
the MMA fragment's layout back to the loaded words and each thread extracts only its own pairs
(docs/kernels.md#dot-operand-tiles). Bit for bit reference/group_quant.py::dequantize_group.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mpsim.kernels.group_units import _group_units


def unit3_high(capability: tuple[int, int] | None) -> bool:
    """UNIT3_HIGH for a device of this compute capability (None: the interpreter): the 2..16-row
    GEMVs at 3 bits gather unit 3 to bits 4..15 of each half (group_units._group_units) on Hopper and later,
    where it saves a shift and two register moves per chunk and row (sm_90a, 16 rows, 64 x 128:
    5.92 -> 5.55 issue slots per weight), and keep _group_units' gather to bits 0..11 on Ampere and
    Ada, whose mma.sync loop it made heavier (sm_80, 64 x 128: 4.91 -> 5.16). The interpreter takes
    it; dequant_group(..., unit3_high=False) tests the other tile bit for bit."""
    return capability is None or capability[0] >= 9


@triton.jit
def _dot_units(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, UNIT3_HIGH: tl.constexpr):
    """_group_units for _dot_w: at 2, 4 and 8 bits the units are the words, loaded as one
    (BLOCK_N, chunks x b) tile (each thread then reads its words from shared memory in 16-byte
    LDS.128, where b word tiles took one 4-byte LDS a word); at 3 bits _group_units' gather (one
    tile of 4-word windows 3c..3c+2 read with LDS.128 cost as much: sm_90a, 16 rows, 64 x 128,
    378 against 379 instructions a trip, the window masks' SEL and ISETP taking what LDS saved)."""
    if BITS == 3:
        units, _ = _group_units(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N, BLOCK_K,
                                UNIT3_HIGH=UNIT3_HIGH)
    else:
        NW: tl.constexpr = BLOCK_K // 32 * BITS
        offs_w = k0 // 32 * BITS + tl.arange(0, NW)
        mask = (offs_n[:, None] < N) & (offs_w[None, :] < KP // 32 * BITS)
        w = tl.load(qw_ptr + offs_n[:, None] * stride_qn + offs_w[None, :], mask=mask, other=0)
        units = tl.reshape(w.to(tl.uint32, bitcast=True), (BLOCK_N, BLOCK_K // 32, BITS))
    return units


@triton.jit
def _dot_w(units, zc, s, BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
           UNIT3_HIGH: tl.constexpr):
    """W_hat (BLOCK_N, BLOCK_K) fp16 = fp16((q - z) s) from units (BLOCK_N, NC, U) (_group_units),
    built for a tl.dot operand. Pair j of a unit (codes 2j, 2j+1) is taken at its own bits k = b j
    - pre of unit >> pre (pre = 8 (b j // 8), so k + b <= 10), with per-pair vectors for the shift,
    the mask and the fp16 exponent of 2^(10-k) (each half then exactly 2^(10-k) + code), all
    broadcast over j and written in column order: Triton's layout pass then carries the MMA
    fragment's layout back to the loaded words, each thread (thread t of a quad holds columns 2t,
    2t+1 of every 8) taking exactly its pairs, and no shared-memory round trip converts the tile
    (the joined tile of _pairs_fp16 was stored to and reloaded from shared memory: STS + LDSM +
    barriers every K tile). Minus c = 2^(10-k) + z (exact) that is q - z; times s rounded once, as
    the reference. The subtract and the multiply are written on (high, low) and the halves swapped
    back after, free in registers: ptxas, given those fp16 halves as scalars, pairs them into
    HADD2/HMUL2 in the other order, so written (low, high) each pair was swapped twice (two PRMTs).
    zc = 1024 + z and s: (BLOCK_N, NC or 1) fp16. The same bits as _pairs_fp16's tile. UNIT3_HIGH
    (unit3_high): at 3 bits unit 3 gathered high (_group_units), its pair j at bits 4 + 3 j."""
    P: tl.constexpr = 8 if BITS == 3 else 32 // BITS
    j = tl.arange(0, P // 2)[None, :]
    pos = BITS * j  # unit 3's pairs at bits 4 + 3 j with UNIT3_HIGH (_group_units)
    if BITS == 3 and UNIT3_HIGH:
        pos = pos + 4 * (tl.arange(0, 4) == 3).to(tl.int32)[:, None]
    pre = 8 * (pos // 8)  # pair j at bits k = pos - pre of unit >> pre, k + b <= 10
    k = pos - pre
    mask = ((((1 << BITS) - 1) << k) * 0x10001).to(tl.uint32)
    magic = (((25 - k) << 10) * 0x10001).to(tl.uint32)
    p = ((units[:, :, :, None] >> pre[None, None, :, :]) & mask[None, None, :, :]) \
        | magic[None, None, :, :]
    lo = p.to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (p >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    # c = 2^(10-k) + z: (1024 + z) + (2^(10-k) - 1024), exact (integers below 2048)
    c = zc[:, :, None, None] + ((1 << (10 - k)) - 1024).to(tl.float16)[None, None, :, :]
    w = (tl.join(hi, lo) - c[:, :, :, :, None]) * s[:, :, None, None, None]
    hi, lo = tl.split(w)
    return tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))
