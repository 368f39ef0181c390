"""The two backends the engine runs on: mpsim's Triton kernels, or the numba references.

Both take and return torch tensors on the backend's device (the reference backend: CPU, converting to
numpy at each op), so the model code is one and the same; only the op implementations differ. Every
op is one kernel launch on the triton backend and one reference call on the reference backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from mpsim.engine.float_weights import EngineWeight, FloatWeight, float_linear_ref
from mpsim.engine.fp_ops import (
    Fp8KV,
    KernelTensors,
    kernel_tensors,
    reference_fp8_decode,
    reference_fp8_kv_write,
    triton_float_linear,
    triton_fp8_decode,
    triton_fp8_kv_write,
)
from mpsim.kernels import runtime
from mpsim.kernels.activations import gelu, silu_mul
from mpsim.kernels.attention_decode import attention_decode
from mpsim.kernels.attention_prefill import attention_prefill
from mpsim.kernels.elementwise import embedding, residual_add
from mpsim.kernels.gemm import AnyPrecWeight, Fp16Weight, GroupWeight, linear
from mpsim.kernels.kv_cache import KVCache
from mpsim.kernels.kv_quant import kv_quant
from mpsim.kernels.norms import layer_norm, rms_norm
from mpsim.kernels.rope import RopeTable, rope
from mpsim.kernels.sampling import argmax
from mpsim.reference.activations import gelu_ref, silu_mul_ref
from mpsim.reference.attention_decode import attention_decode_ref
from mpsim.reference.attention_prefill import attention_prefill_ref
from mpsim.reference.elementwise import embedding_ref, residual_add_ref
from mpsim.reference.gemm_anyprec import gemm_anyprec_ref
from mpsim.reference.gemm_fp16 import gemm_fp16_ref
from mpsim.reference.gemm_group import gemm_group_ref
from mpsim.reference.kv_quant import kv_quant_ref
from mpsim.reference.norms import layer_norm_ref, rms_norm_ref
from mpsim.reference.rope import rope_ref
from mpsim.reference.sampling import argmax_ref


@dataclass(frozen=True)
class LayerCache:
    k: KVCache | Fp8KV  # Fp8KV: the fp8 e4m3 cache (+kv8f, mpsim/engine/fp_ops.py)
    v: KVCache | Fp8KV


class Backend(Protocol):
    name: str
    device: torch.device

    def embedding(self, ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor: ...
    def norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float,
             kind: str) -> torch.Tensor: ...
    def linear(self, x: torch.Tensor, w: EngineWeight, bias: torch.Tensor | None) -> torch.Tensor: ...
    def rope(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rot_dim: int,
             theta: float, max_position: int) -> tuple[torch.Tensor, torch.Tensor]: ...
    def kv_write(self, k: torch.Tensor, v: torch.Tensor, cache: LayerCache, start: torch.Tensor,
                 lens: torch.Tensor | None) -> None: ...
    def attention_prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          lens: torch.Tensor) -> torch.Tensor: ...
    def attention_decode(self, q: torch.Tensor, cache: LayerCache, kv_lens: torch.Tensor,
                         max_kv_len: int) -> torch.Tensor: ...
    def silu_mul(self, x: torch.Tensor) -> torch.Tensor: ...
    def gelu(self, x: torch.Tensor) -> torch.Tensor: ...
    def residual_add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor: ...
    def argmax(self, logits: torch.Tensor) -> torch.Tensor: ...


class TritonBackend:
    """mpsim's Triton kernels: a CUDA GPU, or the CPU interpreter (said once on stderr)."""

    name = "triton"

    def __init__(self) -> None:
        self.device = runtime.device()
        self._rope_tables: dict[tuple[int, float], object] = {}
        self._float: dict[int, tuple[FloatWeight, KernelTensors]] = {}  # by id, the weight kept alive

    def embedding(self, ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return embedding(ids, table, check_ids=False)

    def norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float,
             kind: str) -> torch.Tensor:
        return rms_norm(x, weight, eps) if kind == "rms" else layer_norm(x, weight, bias, eps)

    def linear(self, x: torch.Tensor, w: EngineWeight, bias: torch.Tensor | None) -> torch.Tensor:
        if isinstance(w, FloatWeight):
            if id(w) not in self._float:  # the kernel's tensors, made once per weight
                self._float[id(w)] = (w, kernel_tensors(w, self.device))
            return triton_float_linear(x, w, self._float[id(w)][1], bias)
        return linear(x, w, bias)

    def rope(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rot_dim: int,
             theta: float, max_position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`max_position` is the host's bound on the positions (no device sync to find it)."""
        key = (rot_dim, theta)
        needed = max_position + 1
        table = self._rope_tables.get(key)
        if not isinstance(table, RopeTable) or table.max_positions < needed:
            table = RopeTable.build(rot_dim, theta, max(4096, 2 * needed), self.device)
            self._rope_tables[key] = table
        return rope(q, k, positions, table, check_positions=False)

    def kv_write(self, k: torch.Tensor, v: torch.Tensor, cache: LayerCache, start: torch.Tensor,
                 lens: torch.Tensor | None) -> None:
        if isinstance(cache.k, Fp8KV) and isinstance(cache.v, Fp8KV):
            triton_fp8_kv_write(k, v, cache.k, cache.v, start, lens)
            return
        assert isinstance(cache.k, KVCache) and isinstance(cache.v, KVCache)
        # Positions are in range by construction (the cache holds prompt + gen_len): no host sync.
        kv_quant(k, v, cache.k, cache.v, start, new_lens=lens, check_positions=False)

    def attention_prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          lens: torch.Tensor) -> torch.Tensor:
        return attention_prefill(q, k, v, lens)

    def attention_decode(self, q: torch.Tensor, cache: LayerCache, kv_lens: torch.Tensor,
                         max_kv_len: int) -> torch.Tensor:
        if isinstance(cache.k, Fp8KV) and isinstance(cache.v, Fp8KV):
            return triton_fp8_decode(q, cache.k, cache.v, kv_lens, max_kv_len)
        assert isinstance(cache.k, KVCache) and isinstance(cache.v, KVCache)
        return attention_decode(q, cache.k, cache.v, kv_lens, max_kv_len=max_kv_len)

    def silu_mul(self, x: torch.Tensor) -> torch.Tensor:
        return silu_mul(x)

    def gelu(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x)

    def residual_add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return residual_add(a, b)

    def argmax(self, logits: torch.Tensor) -> torch.Tensor:
        return argmax(logits)


def _np(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().numpy()


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


class ReferenceBackend:
    """The numba references of mpsim.reference, on the CPU."""

    name = "reference"
    device = torch.device("cpu")

    def embedding(self, ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return _t(embedding_ref(_np(ids), _np(table)))

    def norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float,
             kind: str) -> torch.Tensor:
        if kind == "rms":
            return _t(rms_norm_ref(_np(x), _np(weight), eps))
        return _t(layer_norm_ref(_np(x), _np(weight), _np(bias), eps))

    def linear(self, x: torch.Tensor, w: EngineWeight, bias: torch.Tensor | None) -> torch.Tensor:
        x2, b = _np(x.reshape(-1, x.shape[-1])), _np(bias)
        if isinstance(w, Fp16Weight):
            y = gemm_fp16_ref(x2, _np(w.weight), b)
        elif isinstance(w, GroupWeight):
            y = gemm_group_ref(x2, _np(w.qweight), _np(w.scales), _np(w.zeros), w.bits, w.group_size,
                               w.in_features, b)
        elif isinstance(w, AnyPrecWeight):
            y = gemm_anyprec_ref(x2, _np(w.qweight), _np(w.luts[w.bits]), w.bits, w.in_features, b)
        elif isinstance(w, FloatWeight):
            assert x2 is not None
            y = float_linear_ref(x2, w, b)
        else:
            kind = type(w).__name__
            raise ValueError(f"weight: expected Fp16Weight, GroupWeight or AnyPrecWeight, got {kind}")
        return _t(y).reshape(*x.shape[:-1], -1)

    def rope(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rot_dim: int,
             theta: float, max_position: int) -> tuple[torch.Tensor, torch.Tensor]:
        b, t = positions.shape
        pos = _np(positions.reshape(-1))

        def one(x: torch.Tensor) -> torch.Tensor:
            flat = _np(x.reshape(b * t, x.shape[2], x.shape[3]))
            return _t(rope_ref(flat, pos, rot_dim, theta)).reshape(x.shape)

        return one(q), one(k)

    def kv_write(self, k: torch.Tensor, v: torch.Tensor, cache: LayerCache, start: torch.Tensor,
                 lens: torch.Tensor | None) -> None:
        if isinstance(cache.k, Fp8KV) and isinstance(cache.v, Fp8KV):
            reference_fp8_kv_write(k, v, cache.k, cache.v, start, lens)
            return
        b, t = k.shape[:2]
        for x, c in ((k, cache.k), (v, cache.v)):
            rows = x.permute(0, 2, 1, 3)  # (B, H, T, D)
            for s in range(b):
                n = t if lens is None else int(lens[s])
                p0 = int(start[s])
                src = np.ascontiguousarray(_np(rows[s, :, :n]))
                if c.bits == 16:
                    c.data[s, :, p0:p0 + n] = _t(src)
                    continue
                codes, scale, zero = kv_quant_ref(src, c.bits)
                c.data[s, :, p0:p0 + n] = _t(codes)
                assert c.scale is not None and c.zero is not None
                c.scale[s, :, p0:p0 + n] = _t(scale)
                c.zero[s, :, p0:p0 + n] = _t(zero)

    def attention_prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          lens: torch.Tensor) -> torch.Tensor:
        return _t(attention_prefill_ref(_np(q), _np(k), _np(v), True, None, _np(lens)))

    def attention_decode(self, q: torch.Tensor, cache: LayerCache, kv_lens: torch.Tensor,
                         max_kv_len: int) -> torch.Tensor:
        k, v = cache.k, cache.v
        if isinstance(k, Fp8KV) and isinstance(v, Fp8KV):
            return reference_fp8_decode(q, k, v, kv_lens)
        return _t(attention_decode_ref(_np(q), _np(k.data), _np(v.data), _np(kv_lens), k.bits, v.bits,
                                       _np(k.scale), _np(k.zero), _np(v.scale), _np(v.zero)))

    def silu_mul(self, x: torch.Tensor) -> torch.Tensor:
        return _t(silu_mul_ref(_np(x)))

    def gelu(self, x: torch.Tensor) -> torch.Tensor:
        return _t(gelu_ref(_np(x)))

    def residual_add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _t(residual_add_ref(_np(a), _np(b)))

    def argmax(self, logits: torch.Tensor) -> torch.Tensor:
        return _t(argmax_ref(_np(logits)))


def make_backend(name: str) -> Backend:
    """`triton` (GPU, or the CPU interpreter) or `reference` (numba, CPU)."""
    if name == "triton":
        return TritonBackend()
    if name == "reference":
        return ReferenceBackend()
    raise ValueError(f"unknown backend {name!r}; expected one of ['reference', 'triton']")
