"""The one-row group GEMV's unscaled dequantization, (q - z) 2^-E, in inline PTX (GPU only).

The same values, bit for bit, as the pure-Triton body (group_dequant.py's `_group_codes` at 4 bits
and `_group_w_at` at 2 bits with E > 0): each code pair is taken at its own bits of a 32-bit word
with one `lop3.b32` ((w & mask) | exponent: TurboMind's and Marlin's magic-number dequantization,
lmdeploy src/turbomind/kernels/gemm/convert_v2.h and IST-DASLab/marlin marlin/marlin_cuda_kernel.cu
`dequant`), one `shr.b32` per word for the pairs above bit 10, and one `sub.f16x2` per pair that
leaves (2^(10-k) + q) 2^-E - (2^(10-k) + z) 2^-E = (q - z) 2^-E, exact (k + b <= 10 keeps each code
in the fp16 mantissa). The pure-Triton 4-bit loop instead shifts every pair to bit 0 (one SHF per
pair). `tl.inline_asm_elementwise` has no interpreter implementation: only the GPU launcher's switch
(kernels/gemv_group_asm.py) takes this path; the interpreter runs the pure-Triton twin.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mpsim.kernels.group_units import _join4


@triton.constexpr_function
def _magic(k, e):
    """The f16x2 exponent pattern of 2^(10-k-e) in both halves (a code at bits k.. of a half is its
    mantissa: the half is (2^(10-k) + code) 2^-e)."""
    return ((25 - k - e) << 10) * 0x10001


@triton.constexpr_function
def _pairs_asm(bits, e):
    """PTX: one word ($n) -> its pairs at bits k of the word and of word >> 8, minus c_k ($n+1..)."""
    ks = (0, 4) if bits == 4 else (0, 2, 4, 6)
    n = 2 * len(ks)
    mask = (1 << bits) - 1
    # into local registers first: an output may share a register with an input (no early clobber)
    lines = ["{", ".reg .b32 t, " + ", ".join(f"r{j}" for j in range(n)) + ";"]
    for half, src in ((0, f"${n}"), (1, "t")):
        if half:
            lines.append(f"shr.b32 t, ${n}, 8;")
        for i, k in enumerate(ks):
            lines.append(f"lop3.b32 r{half * len(ks) + i}, {src}, {(mask << k) * 0x10001:#010x}, "
                         f"{_magic(k, e):#010x}, 0xea;")
    for j in range(n):
        lines.append(f"sub.f16x2 r{j}, r{j}, ${n + 1 + j % len(ks)};")
    lines += [f"mov.b32 ${j}, r{j};" for j in range(n)] + ["}"]
    return "\n".join(lines)


@triton.constexpr_function
def _three_asm(e):
    """PTX: a 3-bit chunk's words ($16..$18) -> its 16 pairs minus c_k ($19..$23: k = 0, 3, 6, 5, 4),
    the pairs of group_dequant._dequant3 in its order: words 0..2 at bits 0, 3, 6 and bit 0 of
    w >> 9, unit 3 from the top nibbles (pairs 1 and 2 joined with one select-lop3 each)."""
    c = {0: "$19", 3: "$20", 6: "$21", 5: "$22", 4: "$23"}
    lines = ["{", ".reg .b32 s0, s1, s2, t1, t2, " + ", ".join(f"r{j}" for j in range(16)) + ";"]
    lines += [f"shr.b32 s{u}, ${16 + u}, 9;" for u in range(3)]
    pairs = []  # (output, source, k)
    for u in range(3):
        pairs += [(4 * u, f"${16 + u}", 0), (4 * u + 1, f"${16 + u}", 3),
                  (4 * u + 2, f"${16 + u}", 6), (4 * u + 3, f"s{u}", 0)]
    lines += ["shl.b32 t1, s1, 4;", "lop3.b32 t1, s0, t1, 0x00400040, 0xe4;",
              "shl.b32 t2, s2, 4;", "lop3.b32 t2, s1, t2, 0x00600060, 0xe4;"]
    pairs += [(12, "s0", 3), (13, "t1", 6), (14, "t2", 5), (15, "s2", 4)]
    for j, src, k in pairs:
        lines.append(f"lop3.b32 r{j}, {src}, {(7 << k) * 0x10001:#010x}, {_magic(k, e):#010x}, 0xea;")
    for j, _, k in pairs:
        lines.append(f"sub.f16x2 r{j}, r{j}, {c[k]};")
    lines += [f"mov.b32 ${j}, r{j};" for j in range(16)] + ["}"]
    return "\n".join(lines)


@triton.constexpr_function
def _constraints(bits):
    if bits == 3:
        return ",".join(["=r"] * 16 + ["r"] * 8)
    n = 4 if bits == 4 else 8
    return ",".join(["=r"] * n + ["r"] * (1 + n // 2))


@triton.jit
def _halves(p):
    """The fp16 halves (low, high) of uint32 pairs (the compiler reads them as one register)."""
    return (p.to(tl.uint16).to(tl.float16, bitcast=True),
            (p >> 16).to(tl.uint16).to(tl.float16, bitcast=True))


@triton.jit
def _cpair(c):
    """fp16 c -> uint32 (c, c): the f16x2 operand of sub.f16x2."""
    b = c.to(tl.uint16, bitcast=True).to(tl.uint32)
    return b | (b << 16)


@triton.jit
def _three_pairs(out):
    """The 16 pairs of a 3-bit chunk (unit u pair j at 4u + j) -> (BN, NC, 4 units, 4 pairs, 2)."""
    a0, b0 = _halves(out[0])
    a1, b1 = _halves(out[1])
    a2, b2 = _halves(out[2])
    a3, b3 = _halves(out[3])
    c0, d0 = _halves(out[4])
    c1, d1 = _halves(out[5])
    c2, d2 = _halves(out[6])
    c3, d3 = _halves(out[7])
    e0, f0 = _halves(out[8])
    e1, f1 = _halves(out[9])
    e2, f2 = _halves(out[10])
    e3, f3 = _halves(out[11])
    g0, k0 = _halves(out[12])
    g1, k1 = _halves(out[13])
    g2, k2 = _halves(out[14])
    g3, k3 = _halves(out[15])
    lo = _join4(_join4(a0, c0, e0, g0), _join4(a1, c1, e1, g1), _join4(a2, c2, e2, g2),
                _join4(a3, c3, e3, g3))
    hi = _join4(_join4(b0, d0, f0, k0), _join4(b1, d1, f1, k1), _join4(b2, d2, f2, k2),
                _join4(b3, d3, f3, k3))
    return tl.join(lo, hi)


@triton.jit
def _group_d_asm(qw_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn, BITS: tl.constexpr,
                 GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 E: tl.constexpr, k_group):
    """(q - z) 2^-E fp16 (BLOCK_N, BLOCK_K) of columns k0.. (2 or 4 bits; z of k_group's group), the
    twin of group_dequant._group_w_tile(..., SCALED=False, E, k_group) in the same column order."""
    NC: tl.constexpr = BLOCK_K // 32
    offs_c = k0 // 32 + tl.arange(0, NC)
    # no load masks (each masked load zeroes its registers first): rows past N read row N - 1,
    # whose sums the store drops; the partial-sum runs never pass KP (whole groups per split)
    rows = tl.minimum(offs_n, N - 1)
    base = qw_ptr + rows[:, None] * stride_qn + BITS * offs_c[None, :]
    offs_g = k_group // GROUP + tl.arange(0, 1)
    z = tl.load(z_ptr + rows[:, None] * stride_sn + offs_g[None, :])
    return _d_asm(base, z, BITS, BLOCK_N, BLOCK_K, E)


@triton.jit
def _d_asm(base, z, BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
           E: tl.constexpr):
    """_group_d_asm from the tile's word pointers `base` ((BLOCK_N, BLOCK_K / 32): word 0 of each
    chunk) and its rows' zeros z ((BLOCK_N, 1) fp16)."""
    NC: tl.constexpr = BLOCK_K // 32
    c0 = (z + 1024.0) * (1.0 / (1 << E))  # (2^10 + z) 2^-E, exact
    w0 = tl.load(base).to(tl.uint32, bitcast=True)
    w1 = tl.load(base + 1).to(tl.uint32, bitcast=True)
    CON: tl.constexpr = _constraints(BITS)
    if BITS == 3:
        ASM3: tl.constexpr = _three_asm(E)
        out = tl.inline_asm_elementwise(
            ASM3, CON, [w0, w1, tl.load(base + 2).to(tl.uint32, bitcast=True), _cpair(c0),
                        _cpair(c0 + (128.0 - 1024.0) / (1 << E)),   # k = 3
                        _cpair(c0 + (16.0 - 1024.0) / (1 << E)),    # k = 6
                        _cpair(c0 + (32.0 - 1024.0) / (1 << E)),    # k = 5
                        _cpair(c0 + (64.0 - 1024.0) / (1 << E))],   # k = 4
            dtype=(tl.uint32,) * 16, is_pure=True, pack=1)
        d = _three_pairs(out)
    elif BITS == 4:  # units w0..w3, pairs j = 0..3 at bits 0, 4 of w and of w >> 8
        w2 = tl.load(base + 2).to(tl.uint32, bitcast=True)
        w3 = tl.load(base + 3).to(tl.uint32, bitcast=True)
        units = tl.reshape(tl.join(tl.join(w0, w2), tl.join(w1, w3)), (BLOCK_N, NC, 4))
        c4 = _cpair(c0 + (64.0 - 1024.0) / (1 << E))[:, :, None]
        p0, p1, p2, p3 = tl.inline_asm_elementwise(
            _pairs_asm(BITS, E), CON, [units, _cpair(c0)[:, :, None], c4],
            dtype=(tl.uint32, tl.uint32, tl.uint32, tl.uint32), is_pure=True, pack=1)
        l0, h0 = _halves(p0)
        l1, h1 = _halves(p1)
        l2, h2 = _halves(p2)
        l3, h3 = _halves(p3)
        d = tl.join(_join4(l0, l1, l2, l3), _join4(h0, h1, h2, h3))
    else:  # 2 bits: units w0, w1, pairs 0..3 at bits 0, 2, 4, 6 of w, pairs 4..7 of w >> 8
        units = tl.join(w0, w1)
        c2 = c0 + (256.0 - 1024.0) / (1 << E)
        c4 = c0 + (64.0 - 1024.0) / (1 << E)
        c6 = c0 + (16.0 - 1024.0) / (1 << E)
        p0, p1, p2, p3, p4, p5, p6, p7 = tl.inline_asm_elementwise(
            _pairs_asm(BITS, E), CON, [units, _cpair(c0)[:, :, None], _cpair(c2)[:, :, None],
                       _cpair(c4)[:, :, None], _cpair(c6)[:, :, None]],
            dtype=(tl.uint32,) * 8, is_pure=True, pack=1)
        l0, h0 = _halves(p0)
        l1, h1 = _halves(p1)
        l2, h2 = _halves(p2)
        l3, h3 = _halves(p3)
        l4, h4 = _halves(p4)
        l5, h5 = _halves(p5)
        l6, h6 = _halves(p6)
        l7, h7 = _halves(p7)
        d = tl.join(tl.join(_join4(l0, l2, l4, l6), _join4(l1, l3, l5, l7)),
                    tl.join(_join4(h0, h2, h4, h6), _join4(h1, h3, h5, h7)))
    return tl.reshape(d, (BLOCK_N, BLOCK_K))
