"""The any-precision GEMV (M <= 16 rows): y = x @ W_hat.T (+ b), split-K over programs.

One activation row at <= PAIR_MAX_BITS (3) bits: fp16 partial sums, as the group GEMV's
(kernels/gemv_group.py). Per weight lane, T = ANYPREC_PARTIAL_TRIPS (4) consecutive K tiles are
summed in fp16, p += x' w (one HFMA2 per two weights; w the exact fp16 pair-table values), then
added to the lane's fp32 sum once a run (one conversion and one add per lane and run); the row's
fp32 total is multiplied by 2^E once. The LUT values are arbitrary fp16 numbers, so the partial sum
is kept finite by scaling the activations instead: x' = fp16(x 2^-E) with
E = max(0, ceil(log2(T max |lut|))) (pair_exp, the weight's, computed when it is loaded), which
bounds |p| by 65504 for every finite fp16 x. E = 0 (every |lut| <= 1/T: X_SCALED False) leaves x
as it is. docs/numerics.md derives the bound (reference/tolerance.py::gemv_pair_partial_bound); the
numba twin is reference/gemm_anyprec.py::gemv_anyprec_partial_ref.
Otherwise (more rows, wider codes) each W tile is looked up to fp16 (anyprec_dequant._anyprec_tile)
and multiplied in fp32 (gemm_common.mma_rows), as the tiled GEMM does.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mpsim.kernels.anyprec_dequant import _anyprec_tile, _pair_planes, _pair_tile_of
from mpsim.kernels.gemm_common import (
    gemv_acc,
    gemv_program,
    gemv_total,
    load_x_gemv,
    loop_stages,
    mma_rows,
    splitk_finish,
)
from mpsim.kernels.launch_config import anyprec_partial_trips

partial_trips = triton.constexpr_function(anyprec_partial_trips)


@triton.jit
def _pair_fma(p, p0, p1, p2, x_ptr, pair_ptr, offs_n, k, N, K, stride_pn, x_down,
              BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              X_SCALED: tl.constexpr):
    """p + x' w in fp16 for the K tile at k, w looked up from its planes p0..p2 (one HFMA2 per two
    weights)."""
    w = _pair_tile_of(p0, p1, p2, pair_ptr, offs_n, N, stride_pn, BITS, BLOCK_N, BLOCK_K)
    offs_k = k + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0)
    if X_SCALED:  # x 2^-E, one rounding (exact unless it falls below fp16's normals)
        x = x * tl.cast(x_down, tl.float16)
    return p + w * x[None, :]


@triton.jit
def _pair_partial_sums(x_ptr, qw_ptr, pair_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qp, stride_qn,
                       stride_pn, x_down, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, T: tl.constexpr, X_SCALED: tl.constexpr,
                       LOOP_STAGES: tl.constexpr):
    """fp32 lane sums (BLOCK_N, BLOCK_K) of one activation row over [k_lo, k_hi) (runs of T K tiles),
    each run's T products x' w summed in fp16 first. Columns past K have x = 0 (and code 0, a
    finite table value), so a run may end past KP. LOOP_STAGES > 0: Triton stages every load of
    the loop (the pair-table gathers too) that deep in shared memory."""
    NW: tl.constexpr = BLOCK_K // 32
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K * T, num_stages=loop_stages(LOOP_STAGES)):
        p = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float16)
        for t in tl.static_range(T):
            p0, p1, p2 = _pair_planes(qw_ptr, offs_n, k0 + t * BLOCK_K, N, KP, stride_qp, stride_qn,
                                      BITS, NW)
            p = _pair_fma(p, p0, p1, p2, x_ptr, pair_ptr, offs_n, k0 + t * BLOCK_K, N, K, stride_pn,
                          x_down, BITS, BLOCK_N, BLOCK_K, X_SCALED)
        acc += p.to(tl.float32)
    return acc


@triton.jit
def _prefetched_pair_sums(x_ptr, qw_ptr, pair_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qp,
                          stride_qn, stride_pn, x_down, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, T: tl.constexpr, X_SCALED: tl.constexpr):
    """_pair_partial_sums with the next run's plane words loaded (into registers) while this run is
    looked up and summed: a two-stage pipeline of the streamed words only. Triton's own
    (tl.range(num_stages=...)) would stage every load of the trip in shared memory, the pair-table
    gathers (L1 hits) included, at 1.05 more issue slots per weight (docs/kernels.md#pipelined-k-loops).
    The same operations in the same order as _pair_partial_sums: the same bits."""
    tl.static_assert(T == 4, "the prefetched run holds four K tiles (ANYPREC_PARTIAL_TRIPS)")
    NW: tl.constexpr = BLOCK_K // 32
    run: tl.constexpr = BLOCK_K * T
    a0, a1, a2 = _pair_planes(qw_ptr, offs_n, k_lo, N, KP, stride_qp, stride_qn, BITS, NW)
    b0, b1, b2 = _pair_planes(qw_ptr, offs_n, k_lo + BLOCK_K, N, KP, stride_qp, stride_qn, BITS, NW)
    c0, c1, c2 = _pair_planes(qw_ptr, offs_n, k_lo + 2 * BLOCK_K, N, KP, stride_qp, stride_qn, BITS,
                              NW)
    d0, d1, d2 = _pair_planes(qw_ptr, offs_n, k_lo + 3 * BLOCK_K, N, KP, stride_qp, stride_qn, BITS,
                              NW)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, run):
        kn = k0 + run  # the next run: nothing is loaded past the split's end (BOUNDED)
        e0, e1, e2 = _pair_planes(qw_ptr, offs_n, kn, N, KP, stride_qp, stride_qn, BITS, NW, k_hi,
                                  True)
        f0, f1, f2 = _pair_planes(qw_ptr, offs_n, kn + BLOCK_K, N, KP, stride_qp, stride_qn, BITS,
                                  NW, k_hi, True)
        g0, g1, g2 = _pair_planes(qw_ptr, offs_n, kn + 2 * BLOCK_K, N, KP, stride_qp, stride_qn,
                                  BITS, NW, k_hi, True)
        h0, h1, h2 = _pair_planes(qw_ptr, offs_n, kn + 3 * BLOCK_K, N, KP, stride_qp, stride_qn,
                                  BITS, NW, k_hi, True)
        p = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float16)
        p = _pair_fma(p, a0, a1, a2, x_ptr, pair_ptr, offs_n, k0, N, K, stride_pn, x_down, BITS,
                      BLOCK_N, BLOCK_K, X_SCALED)
        p = _pair_fma(p, b0, b1, b2, x_ptr, pair_ptr, offs_n, k0 + BLOCK_K, N, K, stride_pn, x_down,
                      BITS, BLOCK_N, BLOCK_K, X_SCALED)
        p = _pair_fma(p, c0, c1, c2, x_ptr, pair_ptr, offs_n, k0 + 2 * BLOCK_K, N, K, stride_pn,
                      x_down, BITS, BLOCK_N, BLOCK_K, X_SCALED)
        p = _pair_fma(p, d0, d1, d2, x_ptr, pair_ptr, offs_n, k0 + 3 * BLOCK_K, N, K, stride_pn,
                      x_down, BITS, BLOCK_N, BLOCK_K, X_SCALED)
        acc += p.to(tl.float32)
        a0, a1, a2, b0, b1, b2 = e0, e1, e2, f0, f1, f2
        c0, c1, c2, d0, d1, d2 = g0, g1, g2, h0, h1, h2
    return acc


@triton.jit
def gemv_anyprec_kernel(x_ptr, qw_ptr, lut_ptr, pair_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                        M, N, K, KP, K_PER_SPLIT,
                        stride_xm, stride_qp, stride_qn, stride_ln, stride_pn, stride_om,
                        BITS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                        PAIR_BITS: tl.constexpr, LOOP_STAGES: tl.constexpr = 0,
                        x_down=1.0, x_up=1.0, X_SCALED: tl.constexpr = False,
                        LUT_WORDS: tl.constexpr = False, DOT_PAIRS: tl.constexpr = True,
                        REG_PREFETCH: tl.constexpr = True):
    """Few rows: program (n tile, K split) streams BITS planes of its rows over its share of KP
    (K_PER_SPLIT a multiple of T K tiles: gemv_k_unit). One row at BITS <= PAIR_BITS: the fp16
    partial sums above (x_down = 2^-E, x_up = 2^E); otherwise its W tile from the pair table at
    BITS <= PAIR_BITS, else from the LUT, multiplied in fp32. LOOP_STAGES > 0 (the one-row GPU
    configs' loop_stages): the K loop's loads pipelined that deep, but one row at <= PAIR_BITS with
    REG_PREFETCH (loop_stages.prefetched_in_registers: Hopper and later) prefetches the next run's
    plane words in registers instead (two stages). LUT_WORDS (the config's
    lut_words, 2..16 rows at 4 bits: kernels/lut_words.py): lut_ptr holds the LUT's 32-bit words.
    DOT_PAIRS (anyprec_dequant.dot_pairs: Hopper and later): 2..16 rows at <= PAIR_BITS build the
    pair tile in the MMA operand's layout."""
    pid_n, pid_k, offs_n, offs_m, k_lo, k_hi = gemv_program(K_PER_SPLIT, KP, BLOCK_N, BLOCK_M)
    T: tl.constexpr = partial_trips(BITS, BLOCK_M)
    if T > 1:  # one row at <= PAIR_BITS (anyprec_partial_trips)
        if LOOP_STAGES > 0 and REG_PREFETCH:  # the next run's words loaded during this one
            acc = _prefetched_pair_sums(x_ptr, qw_ptr, pair_ptr, offs_n, k_lo, k_hi, N, K, KP,
                                        stride_qp, stride_qn, stride_pn, x_down, BITS, BLOCK_N,
                                        BLOCK_K, T, X_SCALED)
        else:
            acc = _pair_partial_sums(x_ptr, qw_ptr, pair_ptr, offs_n, k_lo, k_hi, N, K, KP,
                                     stride_qp, stride_qn, stride_pn, x_down, BITS, BLOCK_N,
                                     BLOCK_K, T, X_SCALED, LOOP_STAGES)
        total = gemv_total(acc, BLOCK_M) * x_up  # a power of two: exact in fp32
    else:
        acc = gemv_acc(BLOCK_M, BLOCK_N, BLOCK_K)
        for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=loop_stages(LOOP_STAGES)):
            w = _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                              stride_ln, stride_pn, BITS, BLOCK_N, BLOCK_K, PAIR_BITS, LUT_WORDS,
                              DOT_PAIRS and BLOCK_M > 1)
            x = load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M, BLOCK_K)
            acc = mma_rows(w, x, acc, BLOCK_M)
        total = gemv_total(acc, BLOCK_M)
    splitk_finish(total, out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)
