"""Any-precision (bit-plane + per-row LUT) weight-only GEMM in Triton, y = x @ W_hat.T (+ b), and launcher.

Reading at b bits touches only bit-planes 0..b-1 of the parent's (P, N, KP/32) planes and the b-bit
LUT (docs/formats.md), so the bytes read scale with b while one parent model serves every width.
Per tile the kernels look the weights up to fp16 in registers (kernels/anyprec_dequant.py): at
b <= PAIR_MAX_BITS (3) from the row's pair table (pair_table, built when the weight is loaded; one
32-bit load per two weights, as Any-Precision LLM reads fp16 pairs at <= 3 bits), wider from the
LUT. The tiled GEMM feeds the tile to tl.dot; the GEMV (kernels/gemv_anyprec.py) multiplies it on
CUDA cores, with one activation row at <= 3 bits in fp16 partial sums scaled by the weight's pair_exp.
Reference twins: reference/gemm_anyprec.py::gemm_anyprec_ref, ::gemv_anyprec_partial_ref.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels import runtime
from mpsim.kernels.anyprec_dequant import (
    _anyprec_tile,
    dot_pairs,
)
from mpsim.kernels.gemm_common import (
    check_activations,
    check_bias,
    check_config,
    check_weight,
    fp16_bits,
    grouped_tile,
    load_x_tile,
    run_gemm,
    store_output,
)
from mpsim.kernels.gemv_anyprec import gemv_anyprec_kernel
from mpsim.kernels.launch_config import (
    ANYPREC_PARTIAL_TRIPS,
    LUT_WORDS_KEY,
    LaunchConfig,
    cdiv,
    gemv_k_unit,
    prefetched_in_registers,
)
from mpsim.kernels.table_rows import aligned_empty, check_rows_aligned
from mpsim.reference.anyprec import scale_exp
from mpsim.traces.accounting import PAIR_MAX_BITS, padded_k

MAX_PARENT_BITS = 8
# widths whose LUT the kernels gather by OR-ing each code's offset into its row's address
# (anyprec_dequant._lut_fields; wider codes add it: _wide_codes)
LUT_OR_MAX_BITS = 4
# the largest pair_exp: trips x 65504 (the largest fp16) <= 2^18 at ANYPREC_PARTIAL_TRIPS 4
MAX_PAIR_EXP = (ANYPREC_PARTIAL_TRIPS * 65504 - 1).bit_length()
# PAIR_MAX_BITS (traces/accounting.py, 3): widths whose GEMV and GEMM read the per-row pair table, as
# Any-Precision LLM reads fp16 pairs at <= 3 bits with one activation row (4 bits would need 1 KiB a
# row: docs/kernels.md)
__all__ = [
    "dequant_anyprec",
    "gemm_anyprec",
    "gemm_anyprec_kernel",
    "gemv_anyprec_kernel",
    "pair_exp",
    "pair_table",
]

@triton.jit
def gemm_anyprec_kernel(x_ptr, qw_ptr, lut_ptr, pair_ptr, bias_ptr, out_ptr,
                        M, N, K, KP,
                        stride_xm, stride_qp, stride_qn, stride_ln, stride_pn, stride_om,
                        BITS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                        PAIR_BITS: tl.constexpr, LUT_WORDS: tl.constexpr = False,
                        DOT_PAIRS: tl.constexpr = True):
    """Many rows: per output tile, look each W tile up to fp16 in registers (_anyprec_tile: the
    pair table at BITS <= PAIR_BITS, in the MMA operand's layout with DOT_PAIRS, else the LUT, or
    its 32-bit words with LUT_WORDS), then tl.dot."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    tl.assume(KP > 0)  # at least one K tile: no zero-trip path (gemm_common.gemv_program)
    for k0 in range(0, KP, BLOCK_K):
        w = _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                          stride_ln, stride_pn, BITS, BLOCK_N, BLOCK_K, PAIR_BITS, LUT_WORDS,
                          DOT_PAIRS)
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
        acc = tl.dot(w, tl.trans(x), acc)
    store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)


@triton.jit
def dequant_anyprec_kernel(qw_ptr, lut_ptr, pair_ptr, out_ptr,
                           N, K, KP, stride_qp, stride_qn, stride_ln, stride_pn, stride_on,
                           BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           PAIRS: tl.constexpr, DOT: tl.constexpr = False):
    """The exact parts alone: W_hat tile (the kernels' LUT tile helper, or with PAIRS their
    pair-table tile helper; with DOT too, the tl.dot loops' pair tile) stored as fp16 (N, K)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    offs_k = k0 + tl.arange(0, BLOCK_K)
    PAIR_BITS: tl.constexpr = BITS * PAIRS  # the pair tile at every width asked, else the LUT's
    w = _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                      stride_pn, BITS, BLOCK_N, BLOCK_K, PAIR_BITS, False, DOT)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    tl.store(out_ptr + offs_n[:, None] * stride_on + offs_k[None, :], w, mask=mask)


_KERNELS = ("gemv_anyprec_kernel", "gemm_anyprec_kernel")
DEQUANT_BLOCK = (32, 32)  # (BLOCK_N, BLOCK_K) of dequant_anyprec: a test/offline path, not timed


def _spread(c: torch.Tensor, bits: int) -> torch.Tensor:
    """Bit m of c moved to bit 2m."""
    return sum(((c >> m) & 1) << (2 * m) for m in range(bits))  # type: ignore[return-value]


def pair_table(lut: torch.Tensor) -> torch.Tensor:
    """The per-row pair table of an fp16 LUT (N, 2^b), b <= PAIR_MAX_BITS: fp16 (N, 4^b, 2), entry
    spread(c_even) | spread(c_odd) << 1 (the bit interleave of the two codes, spread: bit m to bit
    2m) = (lut[n, c_even], lut[n, c_odd]), one 4-byte-aligned pair the one-row GEMV loads as one
    32-bit word. Built once when a weight is loaded (engine/kernel_weights.py), not per launch;
    each row starts at a multiple of its 4^b x 4 bytes (kernels/table_rows.py: the kernels OR a
    word's offset into its row's address)."""
    if lut.dtype != torch.float16 or lut.dim() != 2 or lut.shape[1] & (lut.shape[1] - 1) or not (
            2 <= lut.shape[1] <= 1 << PAIR_MAX_BITS):
        raise ValueError(f"lut: expected fp16 (N, 2^bits), bits 1..{PAIR_MAX_BITS}, got "
                         f"{lut.dtype} {tuple(lut.shape)}")
    n, size = lut.shape
    bits = size.bit_length() - 1
    codes = torch.arange(size, device=lut.device)
    index = (_spread(codes, bits)[:, None] | (_spread(codes, bits)[None, :] << 1)).reshape(-1)
    pairs = aligned_empty((n, size * size, 2), torch.float16, lut.device, size * size * 4)
    pairs[:, index, 0] = lut[:, :, None].expand(n, size, size).reshape(n, -1)
    pairs[:, index, 1] = lut[:, None, :].expand(n, size, size).reshape(n, -1)
    return pairs


def lut_word_table(lut: torch.Tensor) -> torch.Tensor:
    """The LUT's 32-bit words (kernels/lut_words.py): int32 (N, 2^b), each entry's fp16 bits in the
    low half (the high half 0), rows at multiples of their 2^b x 4 bytes (kernels/table_rows.py).
    Built once when a weight is loaded; the 2..16-row and tiled paths at 4 bits read it."""
    words = aligned_empty(tuple(lut.shape), torch.int32, lut.device, lut.shape[1] * 4)
    words.copy_(fp16_bits(lut))
    return words


def _check_lut_words(words: torch.Tensor, lut: torch.Tensor, device: torch.device) -> torch.Tensor:
    words = check_weight("lut_words", words, torch.int32, 2, device)
    if tuple(words.shape) != tuple(lut.shape):
        raise ValueError(f"lut_words: expected shape {tuple(lut.shape)} (lut_word_table(lut)), got "
                         f"{tuple(words.shape)}")
    check_rows_aligned("lut_words", words)
    return words


def _check_pairs(pairs: torch.Tensor | None, n: int, bits: int,
                 device: torch.device) -> torch.Tensor | None:
    if pairs is None:
        return None
    pairs = check_weight("pairs", pairs, torch.float16, 3, device)
    if bits > PAIR_MAX_BITS or tuple(pairs.shape) != (n, 1 << (2 * bits), 2):
        raise ValueError(f"pairs: expected shape {(n, 1 << (2 * bits), 2)} (N x 4^bits x 2, the "
                         f"pair table of lut{bits}; widths <= {PAIR_MAX_BITS} only), "
                         f"got {tuple(pairs.shape)}")
    check_rows_aligned("pairs", pairs)
    return pairs


def pair_exp(pairs: torch.Tensor, trips: int = ANYPREC_PARTIAL_TRIPS) -> int:
    """E = max(0, ceil(log2(trips max |pairs|))) (reference/anyprec.py::scale_exp): the one-row GEMV
    scales x by 2^-E so that its fp16 partial sums of `trips` K tiles stay finite
    (kernels/gemv_anyprec.py). Computed once when the weight is loaded (kernels/gemm.py
    AnyPrecWeight.pair_exps; it syncs with the device)."""
    return scale_exp(float(pairs.abs().max()) if pairs.numel() else 0.0, trips)


def _pair_words(pairs: torch.Tensor | None) -> torch.Tensor | None:
    """The pair table as the kernels read it: int32 words (N, 4^b), pair i of row n the word [n, i]
    (the even weight's fp16 in its low half: little-endian)."""
    return None if pairs is None else pairs.contiguous().view(torch.int32).reshape(pairs.shape[:2])


def _check_anyprec_weight(qweight: torch.Tensor, lut: torch.Tensor, k: int, bits: int,
                          device: torch.device) -> int:
    """Validate parent planes and the b-bit LUT of an N x k weight; returns KP (padded K)."""
    qweight = check_weight("qweight", qweight, torch.int32, 3, device)
    parent, n, words = qweight.shape
    if not 1 <= parent <= MAX_PARENT_BITS:
        raise ValueError(f"qweight: expected 1..{MAX_PARENT_BITS} bit-planes, got {parent}")
    if not 1 <= bits <= parent:
        raise ValueError(f"bits: expected 1..{parent} (the parent width of qweight), got {bits!r}")
    kp = words * 32
    if kp != padded_k(k, None):
        raise ValueError(f"qweight: expected {padded_k(k, None) // 32} words per plane row for "
                         f"K={k}, got {words}")
    lut = check_weight("lut", lut, torch.float16, 2, device)
    if tuple(lut.shape) != (n, 1 << bits):
        raise ValueError(f"lut: expected shape {(n, 1 << bits)} (N x 2^bits, lut{bits}), "
                         f"got {tuple(lut.shape)}")
    if bits <= LUT_OR_MAX_BITS:
        check_rows_aligned("lut", lut)
    return kp


def _partial_args(e: int | None, m: int, bits: int,
                  capability: tuple[int, int] | None) -> dict[str, object]:
    """The one-row GEMV's x scale arguments (kernels/gemv_anyprec.py): x_down 2^-E, x_up 2^E, and
    whether its pipelined loop prefetches in registers (REG_PREFETCH, by the device's capability)."""
    if m != 1 or bits > PAIR_MAX_BITS:
        return {}
    if isinstance(e, bool) or not isinstance(e, int) or not 0 <= e <= MAX_PAIR_EXP:
        raise ValueError(f"pair_exp: one activation row at {bits} bits sums fp16 partial products "
                         f"of x 2^-E; expected E = pair_exp(pairs) (0..{MAX_PAIR_EXP}, computed when "
                         f"the weight is loaded), got {e!r}")
    return dict(x_down=2.0**-e, x_up=2.0**e, X_SCALED=e > 0,
                REG_PREFETCH=prefetched_in_registers("anyprec", bits,
                                                     None if capability is None else capability[0]))


def _check_block_k(block_k: int | None) -> None:
    if block_k is None or block_k < 32 or block_k & (block_k - 1):
        raise ValueError(f"config: block_k must be a power of two >= 32, got {block_k}")


def gemm_anyprec(x: torch.Tensor, qweight: torch.Tensor, lut: torch.Tensor, *, bits: int,
                 pairs: torch.Tensor | None = None, pair_exp: int | None = None,
                 bias: torch.Tensor | None = None, config: LaunchConfig | None = None,
                 lut_words: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias) at `bits`: x fp16 (M, K), parent planes (P, N, KP/32), lut{bits},
    and at bits <= PAIR_MAX_BITS its pair table (pair_table(lut)), which every path reads, and with
    one activation row the table's pair_exp(pairs) (the one-row GEMV's x scale 2^-E).

    `config` overrides the choice (gemm_common.run_gemm: the heuristic, or autotuning on a GPU);
    tests use it to force split-K widths. `lut_words`: lut_word_table(lut), which a config with
    lut_words reads (AnyPrecWeight builds it once, at load); made here, at each launch that reads
    it, when not given.
    """
    dev = runtime.device()
    x = check_activations(x, dev)
    m, k = x.shape
    kp = _check_anyprec_weight(qweight, lut, k, bits, dev)
    n = qweight.shape[1]
    bias = check_bias(bias, n, dev)
    pairs = _check_pairs(pairs, n, bits, dev)
    if pairs is None and bits <= PAIR_MAX_BITS:
        raise ValueError(f"pairs: at {bits} bits the GEMV and the GEMM read the pair table "
                         f"(pair_table(lut{bits}), built when the weight is loaded); got None")
    capability = torch.cuda.get_device_capability(x.device) if runtime.on_gpu() else None
    gemv_args = _partial_args(pair_exp, m, bits, capability)
    out = torch.empty((m, n), dtype=torch.float16, device=x.device)
    record = dict(m=m, n=n, k=k, w_format="anyprec", w_bits=bits, group_size=None,
                  a_dtype="fp16", out_dtype="fp16", bias=bias is not None)
    args = dict(
        # pointers
        x_ptr=x, qw_ptr=qweight, lut_ptr=lut, pair_ptr=_pair_words(pairs), bias_ptr=bias,
        out_ptr=out,
        # sizes
        M=m, N=n, K=k, KP=kp,
        # strides
        stride_xm=x.stride(0), stride_qp=qweight.stride(0), stride_qn=qweight.stride(1),
        stride_ln=lut.stride(0), stride_pn=0 if pairs is None else pairs.shape[1],
        stride_om=out.stride(0),
        # constexprs
        BITS=bits, HAS_BIAS=bias is not None, PAIR_BITS=PAIR_MAX_BITS,
        DOT_PAIRS=dot_pairs(capability),
    )

    def check(cfg: LaunchConfig) -> None:
        check_config(cfg, _KERNELS, m, n)
        _check_block_k(cfg.block_k)

    if lut_words is not None:
        lut_words = _check_lut_words(lut_words, lut, dev)

    def words() -> dict[str, object]:
        table = lut_words if lut_words is not None else lut_word_table(lut)
        return {"lut_ptr": table, "stride_ln": table.stride(0), "LUT_WORDS": True}

    run_gemm(gemv_anyprec_kernel, gemm_anyprec_kernel, config, record, x.device, kp, check,
             k_unit=lambda c: gemv_k_unit("anyprec", bits, None, c.block_m or 1, c.block_k or 1),
             gemv_args=gemv_args, keyed_args={LUT_WORDS_KEY: words}, **args)
    return out


def dequant_anyprec(qweight: torch.Tensor, lut: torch.Tensor, *, k: int, bits: int,
                    pairs: torch.Tensor | None = None, dot: bool = False) -> torch.Tensor:
    """W_hat fp16 (N, k) at `bits`, looked up by the GEMM's own tile code, or given `pairs` by the
    pair-table code: the one-row GEMV's, or with `dot` the tl.dot loops' (for bit-exact tests)."""
    dev = runtime.device()
    kp = _check_anyprec_weight(qweight, lut, k, bits, dev)
    n = qweight.shape[1]
    pairs = _check_pairs(pairs, n, bits, dev)
    block_n, block_k = DEQUANT_BLOCK
    out = torch.empty((n, k), dtype=torch.float16, device=qweight.device)
    grid = (cdiv(n, block_n), cdiv(k, block_k))
    dequant_anyprec_kernel[grid](
        # pointers
        qw_ptr=qweight, lut_ptr=lut, pair_ptr=_pair_words(pairs), out_ptr=out,
        # sizes
        N=n, K=k, KP=kp,
        # strides
        stride_qp=qweight.stride(0), stride_qn=qweight.stride(1), stride_ln=lut.stride(0),
        stride_pn=0 if pairs is None else pairs.shape[1], stride_on=out.stride(0),
        # constexprs
        BITS=bits, BLOCK_N=block_n, BLOCK_K=block_k, PAIRS=pairs is not None, DOT=dot,
    )
    return out

