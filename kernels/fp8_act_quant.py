"""Dynamic per-token fp8 e4m3 activation quantization (W8A8), and the e4m3 conversion the fp8 kernels share.

One program per row of x (M, K) fp16, two passes over the row (reference/fp8_quant.py's rule, vLLM's
dynamic_per_token_scaled_fp8_quant): amax = max |x| (exact), s = max(fl(amax / 448), 1 / (448 * 512))
(IEEE division, tl.div_rn), codes = e4m3_satfinite(fl(x / s)) (tl.div_rn again: the kernel divides, as
vLLM's does, it does not multiply by 1/s). Outputs: uint8 codes (M, K) and fp32 scales (M,).
Reference twins: reference/fp8_quant.py::quantize_fp8_tokens (numpy), and
reference/minifloat_numba.py::quantize_fp8_tokens_numba (numba); both bit for bit.

The conversion (`e4m3_code`) has two bodies, chosen by the constexpr HW_CVT:
- HW_CVT = True (the GPU launch): `.to(tl.float8e4nv)`, which Triton lowers to PTX
  `cvt.rn.satfinite.e4m3x2.f32` on sm_89+ (the compile test asserts it), the hardware's saturating
  round-to-nearest-even conversion that reference/fp8.py's saturate=True implements.
- HW_CVT = False (the interpreter, and a GPU cross-check): `e4m3_sw`, the same rounding in integer
  arithmetic on the fp32 bits. The interpreter's own fp32 -> float8e4nv cast is wrong (Triton 3.9:
  500 -> 256, 465 -> NaN, 0.75 * 2^-9 -> 0), so it is never used there.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.launch_checks import check_tensor, launch_recorded
from mpsim.kernels.launch_config_fp import act_quant_config, group_quant_config
from mpsim.kernels.runtime import on_gpu
from mpsim.reference.fp8 import E4M3_MAX
from mpsim.reference.fp8_quant import FP8_TOKEN_MIN_SCALE

E4M3_MAX_C = tl.constexpr(E4M3_MAX)
MIN_SCALE_C = tl.constexpr(float(FP8_TOKEN_MIN_SCALE))


@triton.jit
def e4m3_sw(v):
    """fp32 -> uint8 e4m3fn code, RNE, satfinite (overflow and +-inf -> +-448, NaN -> S.1111.111),
    sign kept (-0 -> 0x80), in integer arithmetic on the fp32 bits."""
    bits = v.to(tl.uint32, bitcast=True)
    sign = (bits >> 24) & 0x80
    a = tl.minimum(tl.abs(v), 448.0)  # satfinite: everything past 448 (inf included) is 448
    ab = a.to(tl.uint32, bitcast=True)
    # normal (a >= 2^-6): round the 23-bit mantissa to 3 bits, ties to even, carrying into the
    # exponent; then rebias 127 -> 7 (120 << 3 in the shifted field)
    norm = ((ab + 0x7FFFF + ((ab >> 20) & 1)) >> 20) - 960
    # subnormal (a < 2^-6): n = rne(a * 2^9) through the ulp of 2^23 (a * 512 is exact), n <= 8,
    # and n = 8 is the smallest normal's code
    sub = (a * 512.0 + 8388608.0).to(tl.uint32, bitcast=True) - 0x4B000000
    mag = tl.where(ab >= 0x3C800000, norm, sub)
    mag = tl.where(v != v, 0x7F, mag)
    return (mag | sign).to(tl.uint8)


@triton.jit
def e4m3_code(v, HW_CVT: tl.constexpr):
    """fp32 -> e4m3 code as uint8: the hardware's cvt.rn.satfinite or e4m3_sw (module doc)."""
    if HW_CVT:  # noqa: SIM108 (a static branch on a constexpr)
        code = v.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    else:
        code = e4m3_sw(v)
    return code


@triton.jit
def fp8_act_quant_kernel(x_ptr, q_ptr, s_ptr, K, stride_x, stride_q,
                         BLOCK: tl.constexpr, HW_CVT: tl.constexpr):
    """Row `program_id`: absmax pass, fp32 scale, then the convert pass."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    amax = tl.zeros([BLOCK], tl.float32)
    for start in range(0, K, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < K, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    a = tl.max(amax, 0)
    s = tl.maximum(tl.div_rn(a, E4M3_MAX_C + a * 0.0), MIN_SCALE_C)
    tl.store(s_ptr + row, s)
    for start in range(0, K, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < K
        x = tl.load(x_row + offs, mask=m, other=0.0).to(tl.float32)
        q = e4m3_code(tl.div_rn(x, s + x * 0.0), HW_CVT)
        tl.store(q_ptr + row * stride_q + offs, q, mask=m)


def quantize_fp8_tokens(x: torch.Tensor, *, hw_cvt: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x fp16 (M, K) -> (e4m3 codes uint8 (M, K), fp32 scales (M,)), one scale per token. x must be
    finite, the reference's domain (checking would cost a device sync): a row holding inf or NaN gets
    an inf or NaN scale (and codes +-0 or NaN).

    hw_cvt: the conversion body (module doc); None = the hardware's on a GPU, e4m3_sw under the
    interpreter. hw_cvt=True under the interpreter is an error (its fp8 cast is not the hardware's).
    """
    x = check_tensor("x", x, (torch.float16,), 2)
    m, k = x.shape
    if m < 1 or k < 1:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")
    gpu = on_gpu()
    if hw_cvt is None:
        hw_cvt = gpu
    if hw_cvt and not gpu:
        raise ValueError("hw_cvt=True: the interpreter's fp32 -> float8e4nv cast is not the hardware's "
                         "cvt.rn.satfinite; run the integer conversion (hw_cvt=False) on the CPU")
    codes = torch.empty((m, k), dtype=torch.uint8, device=x.device)
    scales = torch.empty((m,), dtype=torch.float32, device=x.device)
    cfg = act_quant_config(m, k, on_gpu=gpu)
    record = dict(m=m, n=k, k=None, a_dtype="fp16", out_dtype="fp8-e4m3")
    launch_recorded(cfg, "other", record, lambda: fp8_act_quant_kernel[cfg.grid](
        x, codes, scales, k, x.stride(0), codes.stride(0), BLOCK=cfg.block_n, HW_CVT=hw_cvt,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages))
    return codes, scales


@triton.jit
def fp8_group_quant_kernel(x_ptr, q_ptr, s_ptr, K, stride_x, stride_q, stride_s,
                           GROUP: tl.constexpr, HW_CVT: tl.constexpr):
    """Program (row, group): s = fl(amax / 448) (1 for an all-zero group), codes = e4m3(fl(x / s))."""
    row = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    offs = grp * GROUP + tl.arange(0, GROUP)
    m = offs < K
    x = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0).to(tl.float32)
    a = tl.max(tl.abs(x), 0)
    s = tl.div_rn(a, E4M3_MAX_C + a * 0.0)
    s = tl.where(a == 0.0, 1.0, s)
    tl.store(s_ptr + row * stride_s + grp, s)
    tl.store(q_ptr + row * stride_q + offs, e4m3_code(tl.div_rn(x, s + x * 0.0), HW_CVT), mask=m)


def quantize_fp8_groups(x: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """x fp16 (M, K) -> (e4m3 codes uint8 (M, K), fp32 scales (M, cdiv(K, group))): one scale per
    1 x group tile of a row (`fp8b`'s activations, DeepGEMM's input), reference/fp8_quant.py's rule
    (quantize_tiles with tile (1, group)): s = fl(amax / 448), 1 for an all-zero group."""
    x = check_tensor("x", x, (torch.float16,), 2)
    m, k = x.shape
    if m < 1 or k < 1 or group < 16 or group & (group - 1):
        raise ValueError(f"x {tuple(x.shape)}, group {group}: expected a non-empty x and a power-of-two "
                         "group >= 16")
    groups = -(-k // group)
    codes = torch.empty((m, k), dtype=torch.uint8, device=x.device)
    scales = torch.empty((m, groups), dtype=torch.float32, device=x.device)
    gpu = on_gpu()
    cfg = group_quant_config(m, k, group)
    record = dict(m=m, n=k, k=None, a_dtype="fp16", out_dtype="fp8-e4m3")
    launch_recorded(cfg, "other", record, lambda: fp8_group_quant_kernel[cfg.grid](
        x, codes, scales, k, x.stride(0), codes.stride(0), scales.stride(0), GROUP=group, HW_CVT=gpu,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages))
    return codes, scales
