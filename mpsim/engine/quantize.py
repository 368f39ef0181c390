"""Weights quantized at load per the policy, as kernel weight containers keyed by the bits read.

A uniform policy stores each decoder-block linear once in its group format; an any-precision policy
stores ONE parent model (the widest width it reads) and reads fewer bit-planes at lower precision
(`AnyPrecWeight.at_bits` shares the planes). Embeddings and lm_head stay fp16 under every policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import torch

from mpsim.engine.float_weights import EngineWeight, FloatWeight, quantize_float
from mpsim.engine.kernel_weights import anyprec_weight, group_weight
from mpsim.engine.weights import LayerParams, Linear, ModelParams
from mpsim.kernels.gemm import Fp16Weight
from mpsim.policy import Policy
from mpsim.reference.anyprec import AnyPrecWeight as RefAnyPrec
from mpsim.reference.anyprec import quantize_anyprec
from mpsim.reference.group_quant import WHOLE_ROW, GroupQuantWeight, quantize_group
from mpsim.traces.accounting import padded_k

SEED_BITS = 2  # any-precision seed width (PMPD uses 2); the smallest width a policy can read


@dataclass(frozen=True)
class LinearSet:
    """One linear layer at every precision the policy reads, plus its fp16 bias."""

    by_bits: dict[int, EngineWeight]
    bias: torch.Tensor | None

    def at(self, bits: int) -> EngineWeight:
        if bits not in self.by_bits:
            raise ValueError(f"no weights stored for {bits}-bit reads; stored: {sorted(self.by_bits)}")
        return self.by_bits[bits]


def policy_widths(policy: Policy) -> list[int]:
    """Every weight width the policy's passes read (prefill and all decode segments)."""
    return sorted({policy.prefill_bits, *(b for _, b in policy.decode_schedule)})


# What a linear is stored as before it goes onto the kernel device: fp16 numpy, a reference
# quantized container, or a float (fp8/fp4) engine weight. Tensor parallelism shards this form
# (mpsim/engine/shard.py), as vLLM shards a quantized checkpoint.
Stored: TypeAlias = np.ndarray | GroupQuantWeight | RefAnyPrec | FloatWeight


def stored_linear(lin: Linear, policy: Policy, *, rng: np.random.Generator | None = None) -> Stored:
    """The linear's weight quantized per the policy (random codes at the real shape with `rng`)."""
    if policy.family == "fp16":
        return lin.weight
    if policy.family == "float":  # one stored format (fp8 / fp4), the references' containers
        w = policy.weights_at("prefill", 0)
        return quantize_float(lin.weight.astype(np.float16), w.w_format, w.bits, w.group_size)
    if policy.family == "uniform":
        group = WHOLE_ROW if policy.group_size == 0 else int(policy.group_size or 128)
        return (quantize_group(lin.weight, policy.prefill_bits, group) if rng is None
                else random_group(lin.weight.shape, policy.prefill_bits, group, rng))
    parent = max(4, policy.parent_bits)  # the any-precision parent is 4..8 bits (ap3 reads 3 of 4)
    seed = min(SEED_BITS, min(policy_widths(policy)))
    return (quantize_anyprec(lin.weight, parent_bits=parent, seed_bits=seed) if rng is None
            else random_anyprec(lin.weight.shape, parent, seed, rng))


def linear_set(stored: Stored, bias: np.ndarray | None, device: torch.device) -> LinearSet:
    """A stored weight (and its fp16 bias) on the kernel device, keyed by every width it is read at."""
    b = None if bias is None else torch.from_numpy(bias).to(device)
    if isinstance(stored, np.ndarray):
        return LinearSet({16: Fp16Weight(torch.from_numpy(stored).to(device))}, b)
    if isinstance(stored, GroupQuantWeight):
        return LinearSet({stored.bits: group_weight(stored, device)}, b)
    if isinstance(stored, RefAnyPrec):
        base = anyprec_weight(stored, stored.parent_bits, device)
        return LinearSet({w: base.at_bits(w) for w in range(stored.seed_bits, stored.parent_bits + 1)}, b)
    return LinearSet({stored.bits: stored}, b)


def quantize_linear(lin: Linear, policy: Policy, device: torch.device, *,
                    rng: np.random.Generator | None = None) -> LinearSet:
    """Quantize per the policy; with `rng`, draw random codes at the real shapes instead (--dummy)."""
    return linear_set(stored_linear(lin, policy, rng=rng), lin.bias, device)


@dataclass(frozen=True)
class QuantizedLayer:
    linears: dict[str, LinearSet]


def quantize_layer(layer: LayerParams, policy: Policy, device: torch.device, *,
                   rng: np.random.Generator | None = None) -> QuantizedLayer:
    """Every decoder-block linear of one layer, quantized per the policy (random codes with `rng`)."""
    return QuantizedLayer({name: quantize_linear(lin, policy, device, rng=rng)
                           for name, lin in layer.linears.items()})


def quantize_model(params: ModelParams, policy: Policy, device: torch.device, *,
                   dummy_seed: int | None = None) -> list[QuantizedLayer]:
    """Quantize every decoder-block linear of every layer per the policy (random codes if dummy)."""
    rng = None if dummy_seed is None else np.random.default_rng(dummy_seed)
    return [quantize_layer(layer, policy, device, rng=rng) for layer in params.layers]


def random_group(shape: tuple[int, ...], bits: int, group: int, rng: np.random.Generator) -> GroupQuantWeight:
    """Random codes in the group format at a real shape (timing runs: no k-means, no rounding)."""
    n, k = shape
    kp = padded_k(k, group)
    g = kp if group == WHOLE_ROW else group
    words = rng.integers(-(2**31), 2**31, size=(n, kp * bits // 32), dtype=np.int64).astype(np.int32)
    scales = np.full((n, kp // g), 0.002, np.float16)
    zeros = np.full((n, kp // g), 2 ** (bits - 1), np.float16)
    return GroupQuantWeight(words, scales, zeros, bits, g, k, n)


def random_anyprec(shape: tuple[int, ...], parent: int, seed: int, rng: np.random.Generator) -> RefAnyPrec:
    n, k = shape
    kp = padded_k(k, None)
    planes = rng.integers(-(2**31), 2**31, size=(parent, n, kp // 32), dtype=np.int64).astype(np.int32)
    luts = {b: np.sort(rng.standard_normal((n, 2**b)).astype(np.float32) * 0.02, axis=1).astype(np.float16)
            for b in range(seed, parent + 1)}
    return RefAnyPrec(planes, luts, parent, seed, k, n)
