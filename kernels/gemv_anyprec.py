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

from mpsim.kernels.anyprec_dequant import _anyprec_pair_tile, _anyprec_tile
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
def _pair_partial_sums(x_ptr, qw_ptr, pair_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qp, stride_qn,
                       stride_pn, x_down, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, T: tl.constexpr, X_SCALED: tl.constexpr,
                       LOOP_STAGES: tl.constexpr):
    """fp32 lane sums (BLOCK_N, BLOCK_K) of one activation row over [k_lo, k_hi) (runs of T K tiles),
    each run's T products x' w summed in fp16 first. Columns past K have x = 0 (and code 0, a
    finite table value), so a run may end past KP."""
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K * T, num_stages=loop_stages(LOOP_STAGES)):
        p = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float16)
        for t in tl.static_range(T):
            w = _anyprec_pair_tile(qw_ptr, pair_ptr, offs_n, k0 + t * BLOCK_K, N, KP, stride_qp,
                                   stride_qn, stride_pn, BITS, BLOCK_N, BLOCK_K)
            offs_k = k0 + t * BLOCK_K + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0)
            if X_SCALED:  # x 2^-E, one rounding (exact unless it falls below fp16's normals)
                x = x * tl.cast(x_down, tl.float16)
            p += w * x[None, :]
        acc += p.to(tl.float32)
    return acc


@triton.jit
def gemv_anyprec_kernel(x_ptr, qw_ptr, lut_ptr, pair_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                        M, N, K, KP, K_PER_SPLIT,
                        stride_xm, stride_qp, stride_qn, stride_ln, stride_pn, stride_om,
                        BITS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                        PAIR_BITS: tl.constexpr, LOOP_STAGES: tl.constexpr = 0,
                        x_down=1.0, x_up=1.0, X_SCALED: tl.constexpr = False,
                        LUT_WORDS: tl.constexpr = False, DOT_PAIRS: tl.constexpr = True):
    """Few rows: program (n tile, K split) streams BITS planes of its rows over its share of KP
    (K_PER_SPLIT a multiple of T K tiles: gemv_k_unit). One row at BITS <= PAIR_BITS: the fp16
    partial sums above (x_down = 2^-E, x_up = 2^E); otherwise its W tile from the pair table at
    BITS <= PAIR_BITS, else from the LUT, multiplied in fp32. LOOP_STAGES > 0 (the one-row GPU
    configs' loop_stages): the K loop's loads pipelined that deep. LUT_WORDS (the config's
    lut_words, 2..16 rows at 4 bits: kernels/lut_words.py): lut_ptr holds the LUT's 32-bit words.
    DOT_PAIRS (anyprec_dequant.dot_pairs: Hopper and later): 2..16 rows at <= PAIR_BITS build the
    pair tile in the MMA operand's layout."""
    pid_n, pid_k, offs_n, offs_m, k_lo, k_hi = gemv_program(K_PER_SPLIT, KP, BLOCK_N, BLOCK_M)
    T: tl.constexpr = partial_trips(BITS, BLOCK_M)
    if T > 1:  # one row at <= PAIR_BITS (anyprec_partial_trips)
        acc = _pair_partial_sums(x_ptr, qw_ptr, pair_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qp,
                                 stride_qn, stride_pn, x_down, BITS, BLOCK_N, BLOCK_K, T,
                                 X_SCALED, LOOP_STAGES)
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
