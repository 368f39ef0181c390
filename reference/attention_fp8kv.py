"""Reference (numba) decode attention over an fp8 e4m3 KV cache with one fp32 scale per KV head: the
twin of kernels/attention_decode_fp8.py, and the cache's quantizer.

Cache values are e4m3(c) s_h (docs/formats.md#fp8; `+kv8f`). Codes: c = e4m3_satfinite(fl(x / s_h)).
The twin attends with the scales folded as the kernel does: per KV head, reference/attention_decode.py's
decode_f32 over the exact e4m3 values with score scale fl(sm_scale s_k) (one rounding more than the
fp16 reference), then each output element times s_v in fp32 (one rounding) and fp16 once.
"""

from __future__ import annotations

import numpy as np

from mpsim.reference.attention_common import check_gqa, default_sm_scale
from mpsim.reference.attention_decode import decode_f32
from mpsim.reference.fp8 import decode_e4m3, encode_e4m3


def kv_fp8_quant_ref(x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """fp16 rows (..., H, D) and fp32 scales (H,) -> uint8 e4m3 codes (..., H, D)."""
    x, scales = np.asarray(x), np.asarray(scales)
    if x.dtype != np.float16 or x.ndim < 2:
        raise ValueError(f"x: expected float16 (..., H, D), got {x.dtype} {x.shape}")
    if scales.dtype != np.float32 or scales.shape != (x.shape[-2],) or not (scales > 0).all():
        raise ValueError(f"scales: expected positive float32 ({x.shape[-2]},), "
                         f"got {scales.dtype} {scales.shape}")
    return encode_e4m3((x.astype(np.float32) / scales[:, None]).astype(np.float32), saturate=True)


def attention_decode_fp8_ref(q: np.ndarray, k_codes: np.ndarray, v_codes: np.ndarray,
                             k_scales: np.ndarray, v_scales: np.ndarray, kv_len: np.ndarray,
                             sm_scale: float | None = None) -> np.ndarray:
    """fp16 q (B, Hq, D) over contiguous caches of codes (B, Hkv, T, D), scales (Hkv,) -> fp16 (B, Hq, D)."""
    q = np.asarray(q)
    if q.dtype != np.float16 or q.ndim != 3:
        raise ValueError(f"q: expected fp16 (B, Hq, D), got {q.dtype} {q.shape}")
    b, hq, d = q.shape
    k, v = decode_e4m3(np.asarray(k_codes)), decode_e4m3(np.asarray(v_codes))
    if k.shape != v.shape or k.ndim != 4 or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k_codes {k.shape} and v_codes {v.shape}: expected (B={b}, Hkv, T, D={d})")
    hkv = k.shape[1]
    check_gqa(hq, hkv)
    ks, vs = np.asarray(k_scales, np.float32), np.asarray(v_scales, np.float32)
    if ks.shape != (hkv,) or vs.shape != (hkv,):
        raise ValueError(f"k_scales / v_scales: expected float32 ({hkv},), got {ks.shape} and {vs.shape}")
    lens = np.asarray(kv_len, dtype=np.int64)
    if lens.shape != (b,) or (lens < 1).any() or (lens > k.shape[2]).any():
        raise ValueError(f"kv_len: expected (B,) values in 1..{k.shape[2]}, got {kv_len!r}")
    scale = default_sm_scale(sm_scale, d)
    group = hq // hkv
    out = np.empty((b, hq, d), np.float32)
    for h in range(hkv):
        heads = slice(h * group, (h + 1) * group)
        kt = np.ascontiguousarray(k[:, h : h + 1].transpose(0, 1, 3, 2))
        o = decode_f32(q[:, heads].astype(np.float32), kt, np.ascontiguousarray(v[:, h : h + 1]), lens,
                       np.float32(np.float32(scale) * ks[h]))
        out[:, heads] = (o * vs[h]).astype(np.float32)
    return out.astype(np.float16)
