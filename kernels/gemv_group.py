"""The group formats' GEMV (M <= 16 rows): y = x @ W_hat.T (+ b), split-K over programs.

One activation row, 4 bits or fewer, and K tiles narrower than the group (the launcher's 128 x 32):
the scale and zero leave the per-weight loop. Per weight lane, T K tiles of one group (T = 4 when
the group holds a multiple of 4 tiles, else 2, else 1: partial_trips) are summed in fp16,
p = sum_t x (q - z) 2^-E (the unscaled (q - z) 2^-E exact, group_dequant.py; one HFMA2 per two
weights), then added to the fp32 lane sum once: acc += fp32(p) * (s 2^E). E = ceil(log2(T (2^b - 1)))
(partial_exp) keeps |p| <= 65504 for every finite fp16 x (|x| <= 65504), so the partial sum cannot
overflow. docs/numerics.md derives the bound (reference/tolerance.py::gemv_partial_bound); the
numba twin is reference/gemv_group.py::gemv_group_partial_ref.
Otherwise (8 bits, more rows, a K tile of a whole group or more) every weight is dequantized to its
exact fp16 W_hat and multiplied in fp32 (gemm_common.mma_rows), as the tiled GEMM does.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mpsim.kernels.gemm_common import (
    gemv_acc,
    gemv_program,
    gemv_total,
    load_x_gemv,
    loop_stages,
    mma_rows,
    splitk_finish,
)
from mpsim.kernels.group_dequant import _dequant2, _dequant3, _group_w_tile
from mpsim.kernels.group_dequant_asm import _group_d_asm
from mpsim.kernels.launch_config import gemv_partial_trips

partial_trips = triton.constexpr_function(gemv_partial_trips)


def pair_swap(capability: tuple[int, int] | None) -> bool:
    """PAIR_SWAP for a device of this compute capability (None: the interpreter): True on 8.0.

    Triton 3.9 turns LLVM's SLP vectorizer off for capability 8.0 only (triton/backends/nvidia/
    compiler.py, make_llir: `disable_slp_vectorizer=capability == 80`, a ptxas workaround), so there
    the fp16 pair arithmetic reaches ptxas as scalar halves (cvt.u16.u32 for the low, mov.b32
    {_, hi} for the high). ptxas pairs them back into HADD2/HFMA2 with the halves in the other
    order, two PRMTs per code pair (about one ALU lane per weight); with the pair's halves swapped
    in the source it needs none. Other capabilities vectorize in LLVM, in the source order.
    """
    return capability == (8, 0)


@triton.constexpr_function
def partial_exp(bits, trips):
    """E = ceil(log2(trips * (2^bits - 1))): |p| <= trips (2^b - 1) 2^-E 65504 <= 65504."""
    return (trips * ((1 << bits) - 1) - 1).bit_length()


@triton.jit
def _partial_sums(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qn,
                  stride_sn, BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, T: tl.constexpr, ASM: tl.constexpr = False,
                  SWAP: tl.constexpr = False, LOOP_STAGES: tl.constexpr = 0):
    """fp32 lane sums (BLOCK_N, BLOCK_K) of one activation row over [k_lo, k_hi) (whole groups).
    ASM (GPU only, gemv_group_asm.py): the same (q - z) 2^-E from inline PTX (group_dequant_asm.py).
    SWAP: the pairs' halves and x's column pairs both swapped (the same products)."""
    E: tl.constexpr = partial_exp(BITS, T)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K * T, num_stages=loop_stages(LOOP_STAGES)):
        p = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float16)
        for t in tl.static_range(T):
            if ASM:
                d = _group_d_asm(qw_ptr, z_ptr, offs_n, k0 + t * BLOCK_K, N, KP, stride_qn,
                                 stride_sn, BITS, GROUP, BLOCK_N, BLOCK_K, E, k0)
            else:
                d = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0 + t * BLOCK_K, N, KP,
                                  stride_qn, stride_sn, BITS, GROUP, BLOCK_N, BLOCK_K, True, False,
                                  E, k0, SWAP)
            offs_k = k0 + t * BLOCK_K + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0)
            if SWAP:  # column c holds weight c ^ 1 (group_dequant._pairs_fp16, _late)
                x_even, x_odd = tl.split(tl.reshape(x, (BLOCK_K // 2, 2)))
                x = tl.reshape(tl.join(x_odd, x_even), (BLOCK_K,))
            p += d * x[None, :]
        s = tl.load(s_ptr + offs_n * stride_sn + k0 // GROUP, mask=offs_n < N, other=0.0)
        acc += p.to(tl.float32) * (s.to(tl.float32) * (1 << E))[:, None]
    return acc


@triton.jit
def _at_words(base, BITS: tl.constexpr):
    """A K tile's code words at 2 or 3 bits (w0, w1, w2; w2 repeats w0 at 2 bits, never read) from
    its chunks' word pointers (rows clamped inside the weight: unmasked loads)."""
    w0 = tl.load(base).to(tl.uint32, bitcast=True)
    w1 = tl.load(base + 1).to(tl.uint32, bitcast=True)
    w2 = w0
    if BITS == 3:
        w2 = tl.load(base + 2).to(tl.uint32, bitcast=True)
    return w0, w1, w2


@triton.jit
def _run_words(base, step: tl.constexpr, BITS: tl.constexpr, T: tl.constexpr):
    """A run's code words, tile by tile (_at_words of base, base + step, ...; at T = 2 the last two
    tiles repeat the first and are never read)."""
    a0, a1, a2 = _at_words(base, BITS)
    b0, b1, b2 = _at_words(base + step, BITS)
    c0, c1, c2 = a0, a1, a2
    d0, d1, d2 = a0, a1, a2
    if T == 4:
        c0, c1, c2 = _at_words(base + 2 * step, BITS)
        d0, d1, d2 = _at_words(base + 3 * step, BITS)
    return a0, a1, a2, b0, b1, b2, c0, c1, c2, d0, d1, d2


@triton.jit
def _at_fma(p, w0, w1, w2, zc, x_ptr, k, K, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, E: tl.constexpr, SWAP: tl.constexpr):
    """p + x (q - z) 2^-E for the K tile at k from its loaded words (_dequant2 / _dequant3)."""
    ones = tl.full(zc.shape, 1.0, tl.float16)
    if BITS == 2:  # noqa: SIM108 (a static branch on a constexpr)
        d = _dequant2(w0, w1, zc, ones, E, SWAP)
    else:
        d = _dequant3(w0, w1, w2, zc, ones, E, SWAP)
    d = tl.reshape(d, (BLOCK_N, BLOCK_K))
    offs_k = k + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0)
    if SWAP:
        x_even, x_odd = tl.split(tl.reshape(x, (BLOCK_K // 2, 2)))
        x = tl.reshape(tl.join(x_odd, x_even), (BLOCK_K,))
    return p + d * x[None, :]


@triton.jit
def _prefetched_at_sums(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qn,
                        stride_sn, BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, T: tl.constexpr, SWAP: tl.constexpr):
    """_partial_sums at 2 and 3 bits (the GPU configs' loop_stages) with the next run's code words,
    zero and scale loaded into registers while this run is summed: a two-stage pipeline of the
    streamed loads. Triton's own (tl.range(num_stages=...)) staged them in shared memory and read
    them back (sm_90a, 256 x 32: 3.80 -> 3.62 issue slots per weight at 3 bits, 3.58 -> 3.16 at 2;
    sm_80 4.04 -> 4.00, 3.81 -> 3.78, fewer ALU lanes too; docs/kernels.md#pipelined-k-loops). Every
    split ends on a whole run, so the last run's prefetch reloads that run instead of reading past
    it: every load stays inside the weight, unmasked. The same operations in the same order as
    _partial_sums (tests/kernels/test_kern_loop_stages.py: the same bits)."""
    tl.static_assert(T == 4 or T == 2)
    E: tl.constexpr = partial_exp(BITS, T)
    NC: tl.constexpr = BLOCK_K // 32
    run: tl.constexpr = BLOCK_K * T
    rows = tl.minimum(offs_n, N - 1)
    base = qw_ptr + rows[:, None] * stride_qn + BITS * (k_lo // 32 + tl.arange(0, NC))[None, :]
    z_row = z_ptr + rows[:, None] * stride_sn + tl.arange(0, 1)[None, :]
    s_row = s_ptr + rows * stride_sn
    step: tl.constexpr = NC * BITS  # words a K tile
    a0, a1, a2, b0, b1, b2, c0, c1, c2, d0, d1, d2 = _run_words(base, step, BITS, T)
    z = tl.load(z_row + k_lo // GROUP)
    sc = tl.load(s_row + k_lo // GROUP)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, run):
        kn = tl.minimum(k0 + run, k_hi - run)  # the last run reloads itself
        nb = base + (kn - k_lo) // 32 * BITS
        e0, e1, e2, f0, f1, f2, g0, g1, g2, h0, h1, h2 = _run_words(nb, step, BITS, T)
        zn = tl.load(z_row + kn // GROUP)
        sn = tl.load(s_row + kn // GROUP)
        zc = (z + 1024.0) * (1.0 / (1 << E))
        p = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float16)
        p = _at_fma(p, a0, a1, a2, zc, x_ptr, k0, K, BITS, BLOCK_N, BLOCK_K, E, SWAP)
        p = _at_fma(p, b0, b1, b2, zc, x_ptr, k0 + BLOCK_K, K, BITS, BLOCK_N, BLOCK_K, E, SWAP)
        if T == 4:
            p = _at_fma(p, c0, c1, c2, zc, x_ptr, k0 + 2 * BLOCK_K, K, BITS, BLOCK_N, BLOCK_K, E,
                        SWAP)
            p = _at_fma(p, d0, d1, d2, zc, x_ptr, k0 + 3 * BLOCK_K, K, BITS, BLOCK_N, BLOCK_K, E,
                        SWAP)
        acc += p.to(tl.float32) * (sc.to(tl.float32) * (1 << E))[:, None]
        a0, a1, a2, b0, b1, b2 = e0, e1, e2, f0, f1, f2
        c0, c1, c2, d0, d1, d2 = g0, g1, g2, h0, h1, h2
        z, sc = zn, sn
    return acc


@triton.jit
def gemv_group_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                      M, N, K, KP, K_PER_SPLIT,
                      stride_xm, stride_qn, stride_sn, stride_om,
                      BITS: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      SPLIT_K: tl.constexpr, PAIR_SWAP: tl.constexpr = False,
                      LOOP_STAGES: tl.constexpr = 0, sz_ptr=None, SZ_WORDS: tl.constexpr = False,
                      UNIT3_HIGH: tl.constexpr = True):
    """Few rows: program (n tile, K split) unpacks its BLOCK_N packed rows over its share of KP
    (K_PER_SPLIT a multiple of the group when K tiles are narrower: gemm_group's launcher).
    PAIR_SWAP (pair_swap: an sm_80 device): the partial sums with each code pair's halves and x's
    column pairs swapped, the same products (sm_80 SASS, 256 x 32, 4 bits: 4.74 -> 4.15 issue slots
    per weight; 3 and 2 bits with group_dequant._late: 4.57 -> 4.00, 4.36 -> 3.76; sm_90a would
    lose as much: 4 bits 3.75 -> 4.76). LOOP_STAGES > 0 (the one-row GPU configs' loop_stages):
    the K loop's loads pipelined that deep (gemm_common.loop_stages), the same arithmetic; the
    partial sums at 2 and 3 bits prefetch the next run in registers instead (_prefetched_at_sums).
    SZ_WORDS (the config's sz_words, kernels/sz_words.py): the W_hat loop (8 bits, or 2..16 rows)
    reads its scales and zeros from sz_ptr's words, so every load of its trip is staged.
    UNIT3_HIGH (dot_tile.unit3_high: Hopper and later): 2..16 rows at 3 bits gather unit 3 high."""
    pid_n, pid_k, offs_n, offs_m, k_lo, k_hi = gemv_program(K_PER_SPLIT, KP, BLOCK_N, BLOCK_M)
    T: tl.constexpr = partial_trips(BITS, GROUP, BLOCK_M, BLOCK_K)
    if T > 1 and LOOP_STAGES > 0 and BITS <= 3:  # loop_stages.prefetched_in_registers
        acc = _prefetched_at_sums(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, KP,
                                  stride_qn, stride_sn, BITS, GROUP, BLOCK_N, BLOCK_K, T, PAIR_SWAP)
    elif T > 1:
        acc = _partial_sums(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qn,
                            stride_sn, BITS, GROUP, BLOCK_N, BLOCK_K, T, False, PAIR_SWAP,
                            LOOP_STAGES)
    else:
        acc = gemv_acc(BLOCK_M, BLOCK_N, BLOCK_K)
        for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=loop_stages(LOOP_STAGES)):
            w = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                              BITS, GROUP, BLOCK_N, BLOCK_K, True, sz_ptr=sz_ptr,
                              SZ_WORDS=SZ_WORDS, DOT=BLOCK_M > 1, UNIT3_HIGH=UNIT3_HIGH)
            x = load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M, BLOCK_K)
            acc = mma_rows(w, x, acc, BLOCK_M)
    splitk_finish(gemv_total(acc, BLOCK_M), out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)
