"""FP4 (NVFP4 / MXFP4) weight-only GEMV/GEMM in Triton, A16: y = fp16(fl(acc G) + b), acc = sum_k x_k v_k.

The weight is reference/fp4_quant.py's Fp4Weight: e2m1 codes two per byte (element 2i in the low
nibble), one block scale per 16 (NVFP4: e4m3, plus the fp32 per-tensor g) or 32 (MXFP4: e8m0)
weights along K. v = e2m1(q) S_b is exact (at most 5 significant bits): the kernel forms it exactly,
so its only roundings are the fp32 sums (and the product by G): reference/tolerance_fp.py::fp4_gemv_bound.

Decoding, two codes at a time from 32-bit words (the packed bytes viewed as int32, 8 codes a word,
code j at bits 4j): pair p holds codes p and p + 4, and
`((w << (9 - 4p)) & 0x0E000E00) | ((w << (12 - 4p)) & 0x80008000)` (right shifts for negative
amounts) makes each 16-bit half the fp16 number e2m1(code) 2^-14 exactly (the code's exponent and
mantissa bits land in fp16's, its sign in fp16's; the e2m1 subnormal 0.5 becomes the fp16 subnormal
2^-15). Then:
- NVFP4: one fp16 multiply by 256 e4m3(S_b) (S_b's bits placed in fp16's the same way, times 2^8):
  e2m1 S_b 2^-14 is a multiple of 2^-24 below 0.17, so the fp16 product is exact; G = fl(g 2^14)
  (a power-of-two scaling, exact) is applied to each split's fp32 partial.
- MXFP4: the fp16 value widened to fp32 times 2^(c - 113) (c the e8m0 code; bits (c + 14) << 23),
  exact for c <= 240 (the host checks; weights quantized from fp16 have c <= 142); G = 1. With more
  than one activation row the dot runs on the unscaled fp16 values one 32-wide block per K step and
  the fp32 result is scaled per row (the scale is a power of two: exact).
One row: per-lane fp32 FMAs, reduced once after the K loop (kernels/gemm_common.py's gemv_acc);
2..16 rows and more: tl.dot on fp16 (exact products, fp32 sums). Split-K as the fp16 GEMV.
Reference twin: reference/gemv_fp4.py::gemv_fp4_ref (numba).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.gemm_common import (
    check_activations,
    check_bias,
    gemv_acc,
    gemv_total,
    grouped_tile,
    launch_split_k,
    load_x_gemv,
    loop_stages,
    mma_rows,
    split_columns,
    splitk_finish,
)
from mpsim.kernels.launch_checks import check_tensor
from mpsim.kernels.launch_config import LaunchConfig, cdiv, loop_stages_of
from mpsim.kernels.launch_config_fp import gemv_fp4_config
from mpsim.kernels.runtime import device, on_gpu
from mpsim.reference.fp4_quant import FP4_BLOCK, Fp4Weight

MX_MAX_CODE = 240  # 2^(c - 113) must be a normal fp32: c + 14 <= 254


@triton.jit
def _halves(h):
    """uint32 whose halves are fp16 bit patterns -> the two fp16 tensors (low, high), joined."""
    lo = (h & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (h >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return tl.join(lo, hi)


@triton.jit
def fp4_codes_tile(qw_ptr, offs_n, k0, N, KP, stride_qn, BLOCK_K: tl.constexpr):
    """Codes [offs_n, k0:k0+BLOCK_K] as fp16 e2m1(q) 2^-14, (BLOCK_N, BLOCK_K) in K order; 0 outside."""
    W: tl.constexpr = BLOCK_K // 8
    offs_w = k0 // 8 + tl.arange(0, W)
    mask = (offs_n[:, None] < N) & (offs_w[None, :] < KP // 8)
    w = tl.load(qw_ptr + offs_n[:, None] * stride_qn + offs_w[None, :], mask=mask, other=0)
    w = w.to(tl.uint32, bitcast=True)
    # pair p: codes p (low half) and p + 4 (high half), code bits 4p.. moved to 9.. (magnitude) and
    # sign bit 4p + 3 to 15, one shift each (none for pair 3's sign); joined so that the flat index
    # is the code's
    a0 = _halves(((w << 9) & 0x0E000E00) | ((w << 12) & 0x80008000))
    a1 = _halves(((w << 5) & 0x0E000E00) | ((w << 8) & 0x80008000))
    a2 = _halves(((w << 1) & 0x0E000E00) | ((w << 4) & 0x80008000))
    a3 = _halves(((w >> 3) & 0x0E000E00) | (w & 0x80008000))
    v = tl.join(tl.join(a0, a2), tl.join(a1, a3))  # [n, w, h, a, b] = code 4h + 2a + b
    return tl.reshape(v, (offs_n.shape[0], BLOCK_K))


@triton.jit
def fp4_scales(s_ptr, offs_n, k0, N, KP, stride_sn, NB: tl.constexpr, B: tl.constexpr,
               MX: tl.constexpr):
    """Block scales of [offs_n, k0:k0+NB*B] as (BLOCK_N, NB): NVFP4 fp16 256 e4m3(S_b); MXFP4 fp32
    2^(c - 113)."""
    offs_b = k0 // B + tl.arange(0, NB)
    mask = (offs_n[:, None] < N) & (offs_b[None, :] < KP // B)
    c = tl.load(s_ptr + offs_n[:, None] * stride_sn + offs_b[None, :], mask=mask, other=0).to(tl.uint32)
    if MX:
        s = ((c + 14) << 23).to(tl.float32, bitcast=True)
    else:
        h = ((c & 0x80) << 8) | ((c & 0x7F) << 7)
        s = h.to(tl.uint16).to(tl.float16, bitcast=True) * 256.0
    return s


@triton.jit
def fp4_weight_tile(qw_ptr, s_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                    BLOCK_K: tl.constexpr, B: tl.constexpr, MX: tl.constexpr):
    """The exact weights v 2^-14 (NVFP4, fp16) or v (MXFP4, fp32) of [offs_n, k0:k0+BLOCK_K]."""
    NB: tl.constexpr = BLOCK_K // B
    q = tl.reshape(fp4_codes_tile(qw_ptr, offs_n, k0, N, KP, stride_qn, BLOCK_K), (offs_n.shape[0], NB, B))
    s = fp4_scales(s_ptr, offs_n, k0, N, KP, stride_sn, NB, B, MX)
    if MX:  # noqa: SIM108 (a static branch on a constexpr)
        v = q.to(tl.float32) * s[:, :, None]
    else:
        v = q * s[:, :, None]
    return tl.reshape(v, (offs_n.shape[0], BLOCK_K))


@triton.jit
def gemv_fp4_kernel(x_ptr, qw_ptr, s_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                    M, N, K, KP, K_PER_SPLIT, g_scale,
                    stride_xm, stride_qn, stride_sn, stride_om,
                    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, B: tl.constexpr, MX: tl.constexpr, GROUP_M: tl.constexpr,
                    SPLIT_K: tl.constexpr, LOOP_STAGES: tl.constexpr = 0):
    """Program (output tile, K split): decode, multiply-add, fl(partial G), split-K finish.
    LOOP_STAGES: the K loop's pipeline depth (gemm_common.loop_stages; the one-row GPU configs')."""
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = gemv_acc(BLOCK_M, BLOCK_N, BLOCK_K)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, KP)
    if BLOCK_M > 1:  # no empty split (split_columns): no zero-trip path (gemm_common.gemv_program)
        tl.assume(k_hi > k_lo)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=loop_stages(LOOP_STAGES)):
        x = load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M, BLOCK_K)
        if MX and BLOCK_M > 1:  # one block per K step (BLOCK_K == B): dot, then the power of two
            q = fp4_codes_tile(qw_ptr, offs_n, k0, N, KP, stride_qn, BLOCK_K)
            s = fp4_scales(s_ptr, offs_n, k0, N, KP, stride_sn, 1, B, MX)
            acc += tl.dot(q, tl.trans(x)) * s
        else:
            w = fp4_weight_tile(qw_ptr, s_ptr, offs_n, k0, N, KP, stride_qn, stride_sn, BLOCK_K, B, MX)
            acc = mma_rows(w, x, acc, BLOCK_M)
    total = gemv_total(acc, BLOCK_M) * g_scale
    splitk_finish(total, out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n, tile, pid_k,
                  M, N, stride_om, HAS_BIAS, SPLIT_K)


@triton.jit
def dequant_fp4_kernel(qw_ptr, s_ptr, out_ptr, N, KP, g, stride_qn, stride_sn, stride_on,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B: tl.constexpr, MX: tl.constexpr):
    """x_hat = fl(v g) (NVFP4: v from the fp16 v 2^-14 times 2^14) or v (MXFP4), fp32 (N, KP)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    for k0 in range(0, KP, BLOCK_K):
        v = fp4_weight_tile(qw_ptr, s_ptr, offs_n, k0, N, KP, stride_qn, stride_sn, BLOCK_K, B, MX)
        if MX:  # noqa: SIM108 (a static branch on a constexpr)
            w = v
        else:
            w = (v.to(tl.float32) * 16384.0) * g
        offs_k = k0 + tl.arange(0, BLOCK_K)
        tl.store(out_ptr + offs_n[:, None] * stride_on + offs_k[None, :], w,
                 mask=(offs_n[:, None] < N) & (offs_k[None, :] < KP))


def fp4_weight_tensors(fw: Fp4Weight, dev: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """An Fp4Weight as the kernel's tensors: the packed codes viewed as int32 words (N, Kp/8) and the
    uint8 scale codes (N, Kp/B). MXFP4 scale codes above MX_MAX_CODE are an error (module doc)."""
    if fw.kind == "mxfp4" and fw.scales.size and int(fw.scales.max()) > MX_MAX_CODE:
        raise ValueError(f"mxfp4 scales: code {int(fw.scales.max())} > {MX_MAX_CODE} (a block scale "
                         f"above 2^{MX_MAX_CODE - 127}); the kernel's fp32 scaling cannot hold it")
    dev = dev or device()
    packed = torch.from_numpy(fw.packed.copy()).to(dev).view(torch.int32)
    return packed, torch.from_numpy(fw.scales.copy()).to(dev)


def gemv_fp4(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, global_scale: float, *,
             kind: str, k: int, bias: torch.Tensor | None = None,
             config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias), x fp16 (M, k); qweight int32 (N, Kp/8) and scales uint8 (N, Kp/B)
    from fp4_weight_tensors; global_scale g (NVFP4; 1.0 for MXFP4) -> fp16 (M, N)."""
    if kind not in FP4_BLOCK:
        raise ValueError(f"kind={kind!r}: expected one of {tuple(FP4_BLOCK)}")
    dev = device()
    x = check_activations(x, dev)
    m = x.shape[0]
    b = FP4_BLOCK[kind]
    kp = cdiv(k, b) * b
    if x.shape[1] != k:
        raise ValueError(f"x: expected K = {k} columns, got shape {tuple(x.shape)}")
    qweight = check_tensor("qweight", qweight, (torch.int32,), 2, device=dev)
    n = qweight.shape[0]
    if tuple(qweight.shape) != (n, kp // 8) or not qweight.is_contiguous():
        raise ValueError(f"qweight: expected a contiguous ({n}, {kp // 8}) int32 tensor for K = {k}, "
                         f"got {tuple(qweight.shape)}")
    scales = check_tensor("scales", scales, (torch.uint8,), 2, shape=(n, kp // b), device=dev)
    bias = check_bias(bias, n, dev)
    mx = kind == "mxfp4"
    if mx and global_scale != 1.0:
        raise ValueError(f"global_scale={global_scale}: MXFP4 has no per-tensor scale (expected 1.0)")
    cfg = config or gemv_fp4_config(m, n, kp, kind, on_gpu=on_gpu())
    tiles = cdiv(m, cfg.block_m or 1) * cdiv(n, cfg.block_n or 1)
    bk = cfg.block_k or 1
    if cfg.kernel != "gemv_fp4_kernel" or tuple(cfg.grid) != (tiles, cfg.split_k) or bk % b \
            or (mx and (cfg.block_m or 1) > 1 and bk != b):
        raise ValueError(f"config: {cfg} is not a gemv_fp4_kernel config for M={m}, N={n}, {kind}")
    out = torch.empty((m, n), dtype=torch.float16, device=x.device)
    g = float(torch.tensor(global_scale, dtype=torch.float32)) * (1.0 if mx else 16384.0)
    record = dict(m=m, n=n, k=k, w_format=kind, w_bits=4, group_size=b, a_dtype="fp16",
                  out_dtype="fp16", bias=bias is not None)
    launch_split_k(gemv_fp4_kernel, cfg, record, x.device, m, n,
                   x_ptr=x, qw_ptr=qweight, s_ptr=scales, bias_ptr=bias, out_ptr=out,
                   M=m, N=n, K=k, KP=kp, K_PER_SPLIT=split_columns(cfg, kp, bk), g_scale=g,
                   stride_xm=x.stride(0), stride_qn=qweight.stride(0), stride_sn=scales.stride(0),
                   stride_om=out.stride(0), HAS_BIAS=bias is not None, BLOCK_M=cfg.block_m,
                   BLOCK_N=cfg.block_n, BLOCK_K=bk, B=b, MX=mx, GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k,
                   LOOP_STAGES=loop_stages_of(cfg.extra))
    return out


def dequant_fp4(qweight: torch.Tensor, scales: torch.Tensor, global_scale: float, *, kind: str,
                k: int) -> torch.Tensor:
    """The fp32 (N, k) weights the kernels use, bit for bit reference/fp4_quant.py's dequantize_fp4
    (a verification utility; records nothing)."""
    b = FP4_BLOCK[kind]
    kp = cdiv(k, b) * b
    n = qweight.shape[0]
    out = torch.empty((n, kp), dtype=torch.float32, device=qweight.device)
    bk = max(32, b)
    dequant_fp4_kernel[(cdiv(n, 16),)](qweight, scales, out, n, kp, float(global_scale),
                                       qweight.stride(0), scales.stride(0), out.stride(0),
                                       BLOCK_N=16, BLOCK_K=bk, B=b, MX=kind == "mxfp4")
    return out[:, :k]

