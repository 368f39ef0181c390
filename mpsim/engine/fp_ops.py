"""The fp8 / fp4 ops of mpsim's engine (issue 26 point 5): the decoder-block linears through mpsim's
fp8 / fp4 Triton kernels, and the fp8 e4m3 KV cache, on both backends.

Weights: `FloatWeight.stored` (the references' containers, quantized once at load:
reference/fp8_quant.py per tensor / per channel / 128x128 blocks, fp4_quant.py NVFP4 / MXFP4) as the
kernels' tensors (`kernel_tensors`, made once per weight on the backend's device). A W8A8 linear is
two launches as synthesis builds it (mpsim/library/mpsim_fp.py): the activation quantization
(per token, kernels/fp8_act_quant.py; per 1x128 group for fp8-block), recorded under
`{module}_act_quant`, then the GEMM on codes; an FP4 linear is one weight-only launch.

KV cache: `Fp8KV`, one layer's K (or V) as e4m3 codes (B, H_kv, T, D) with one fp32 scale per KV
head. The scales are 1.0 (an assumption, stated: vLLM's default when a checkpoint carries no
calibrated k/v scales, vllm/model_executor/layers/quantization/kv_cache.py BaseKVCacheMethod; a
value beyond e4m3's 448 saturates, the hardware conversion's rule). The Triton write quantizes a
layer's K and V heads stacked (one launch,
kernels/attention_decode_fp8.py kv_fp8_quant) and places the codes in the cache with torch copies
(host indices: one read of `start` and `lens` a layer); the reference write is
reference/attention_fp8kv.py's kv_fp8_quant_ref, bit for bit the kernel's codes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mpsim.engine.float_weights import FloatWeight
from mpsim.kernels.attention_decode_fp8 import attention_decode_fp8, kv_fp8_quant
from mpsim.kernels.fp8_act_quant import quantize_fp8_groups, quantize_fp8_tokens
from mpsim.kernels.gemm_fp8 import gemm_fp8_codes
from mpsim.kernels.gemm_fp8b import gemm_fp8b_codes
from mpsim.kernels.gemv_fp4 import fp4_weight_tensors, gemv_fp4
from mpsim.reference.attention_fp8kv import attention_decode_fp8_ref, kv_fp8_quant_ref
from mpsim.reference.fp4_quant import Fp4Weight
from mpsim.reference.fp8 import decode_e4m3
from mpsim.reference.fp8_quant import FP8_BLOCK, Fp8Tensor
from mpsim.traces.recorder import active_recorder

FP8_CACHE = "fp8-e4m3"
KV_SCALE = 1.0  # per KV head (module doc: an assumption)


@dataclass(frozen=True)
class Fp8KV:
    """One layer's K or V cache in fp8 e4m3: codes (B, H_kv, T, D) uint8, scales (H_kv,) fp32."""

    data: torch.Tensor
    scales: torch.Tensor
    head_dim: int
    bits: int = 8
    scale: None = None  # the int caches' per-token scale and zero: none here
    zero: None = None
    kv_block: None = None

    @staticmethod
    def empty(batch: int, kv_heads: int, tokens: int, head_dim: int, device: torch.device) -> Fp8KV:
        return Fp8KV(torch.zeros((batch, kv_heads, tokens, head_dim), dtype=torch.uint8, device=device),
                     torch.full((kv_heads,), KV_SCALE, dtype=torch.float32, device=device), head_dim)

    def dense(self, t: int) -> torch.Tensor:
        """The first t slots as fp16 (B, H_kv, t, D): e4m3 value times the head's scale."""
        codes = self.data[:, :, :t].cpu().numpy()
        x = decode_e4m3(codes) * self.scales.cpu().numpy()[None, :, None, None]
        return torch.from_numpy(x.astype(np.float16)).to(self.data.device)


@contextlib.contextmanager
def act_quant_scope() -> Iterator[None]:
    """The activation quantization's launch recorded as `{module}_act_quant` (synthesis's name)."""
    rec = active_recorder()
    if rec is None:
        yield
        return
    with rec.scope(module=f"{rec.context['module']}_act_quant"):
        yield


@dataclass(frozen=True)
class KernelTensors:
    """A FloatWeight as its kernel's tensors: codes (uint8 (N, K) fp8; int32 words (N, Kp/8) fp4),
    scales (fp32 fp8; uint8 codes fp4) and the FP4 per-tensor scale."""

    codes: torch.Tensor
    scales: torch.Tensor
    global_scale: float = 1.0


def kernel_tensors(w: FloatWeight, device: torch.device) -> KernelTensors:
    stored = w.stored
    if isinstance(stored, Fp4Weight):
        packed, scales = fp4_weight_tensors(stored, device)
        return KernelTensors(packed, scales, float(stored.global_scale))
    if not isinstance(stored, Fp8Tensor):
        raise ValueError(f"{w.w_format} weight: no stored codes (quantize_float keeps them)")
    codes = torch.from_numpy(np.ascontiguousarray(stored.codes)).to(device)
    scales = np.ascontiguousarray(stored.scales, dtype=np.float32)
    flat = w.w_format == "fp8"  # per tensor (1, 1) -> (1,); per channel (N, 1) -> (N,)
    return KernelTensors(codes, torch.from_numpy(scales.reshape(-1) if flat else scales).to(device))


def triton_float_linear(x: torch.Tensor, w: FloatWeight, t: KernelTensors,
                        bias: torch.Tensor | None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias) through mpsim's fp8 / fp4 kernels."""
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    if w.w_format == "fp8":
        with act_quant_scope():
            a, sa = quantize_fp8_tokens(x2)
        y = gemm_fp8_codes(a, sa, t.codes, t.scales, bias)
    elif w.w_format == "fp8-block":
        with act_quant_scope():
            a, sa = quantize_fp8_groups(x2, FP8_BLOCK)
        y = gemm_fp8b_codes(a, sa, t.codes, t.scales, bias)
    else:
        y = gemv_fp4(x2, t.codes, t.scales, t.global_scale, kind=w.w_format, k=w.in_features, bias=bias)
    return y.reshape(*x.shape[:-1], -1)


def _placements(start: torch.Tensor, lens: torch.Tensor | None, t: int) -> list[tuple[int, int]]:
    """(first slot, tokens) per sequence, on the host."""
    first = start.tolist()
    counts = [t] * len(first) if lens is None else lens.tolist()
    return [(int(p), int(n)) for p, n in zip(first, counts, strict=True)]


def triton_fp8_kv_write(k: torch.Tensor, v: torch.Tensor, kc: Fp8KV, vc: Fp8KV, start: torch.Tensor,
                        lens: torch.Tensor | None) -> None:
    """New K and V (B, T, H_kv, D) fp16 quantized in one launch and placed at each sequence's slots."""
    b, t, h, d = (int(s) for s in k.shape)
    stacked = torch.cat([k, v], dim=2).reshape(b * t, 2 * h, d).contiguous()
    record: dict[str, Any] | None = None
    if active_recorder() is not None:
        record = dict(batch=b, q_len=t, num_kv_heads=h, head_dim=d, k_bits=8, v_bits=8, kv_block=None,
                      kv_format=FP8_CACHE)
    codes = kv_fp8_quant(stacked, torch.cat([kc.scales, vc.scales]), record).view(b, t, 2 * h, d)
    for s, (p0, n) in enumerate(_placements(start, lens, t)):
        kc.data[s, :, p0:p0 + n] = codes[s, :n, :h].transpose(0, 1)
        vc.data[s, :, p0:p0 + n] = codes[s, :n, h:].transpose(0, 1)


def triton_fp8_decode(q: torch.Tensor, kc: Fp8KV, vc: Fp8KV, kv_lens: torch.Tensor,
                      max_kv_len: int) -> torch.Tensor:
    return attention_decode_fp8(q, kc.data, vc.data, kc.scales, vc.scales, kv_lens, max_kv_len=max_kv_len)


def reference_fp8_kv_write(k: torch.Tensor, v: torch.Tensor, kc: Fp8KV, vc: Fp8KV, start: torch.Tensor,
                           lens: torch.Tensor | None) -> None:
    t = int(k.shape[1])
    for x, c in ((k, kc), (v, vc)):
        scales = c.scales.cpu().numpy()
        for s, (p0, n) in enumerate(_placements(start, lens, t)):
            codes = kv_fp8_quant_ref(x[s, :n].cpu().numpy(), scales)  # (n, H, D)
            c.data[s, :, p0:p0 + n] = torch.from_numpy(np.ascontiguousarray(codes.transpose(1, 0, 2)))


def reference_fp8_decode(q: torch.Tensor, kc: Fp8KV, vc: Fp8KV, kv_lens: torch.Tensor) -> torch.Tensor:
    out = attention_decode_fp8_ref(q.cpu().numpy(), kc.data.cpu().numpy(), vc.data.cpu().numpy(),
                                   kc.scales.cpu().numpy(), vc.scales.cpu().numpy(), kv_lens.cpu().numpy())
    return torch.from_numpy(out)
