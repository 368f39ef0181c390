"""Weights quantized at load per the policy, as kernel weight containers keyed by the bits read.

A uniform policy stores each decoder-block linear once in its group format; an any-precision policy
stores ONE parent model (the widest width it reads) and reads fewer bit-planes at lower precision
(`AnyPrecWeight.at_bits` shares the planes). Embeddings and lm_head stay fp16 under every policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mpsim.engine.float_weights import EngineWeight, quantize_float
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


def quantize_linear(lin: Linear, policy: Policy, device: torch.device, *,
                    rng: np.random.Generator | None = None) -> LinearSet:
    """Quantize per the policy; with `rng`, draw random codes at the real shapes instead (--dummy)."""
    bias = None if lin.bias is None else torch.from_numpy(lin.bias).to(device)
    if policy.family == "fp16":
        return LinearSet({16: Fp16Weight(torch.from_numpy(lin.weight).to(device))}, bias)
    if policy.family == "float":  # one stored format (fp8 / fp4), the references' containers
        w = policy.weights_at("prefill", 0)
        fw = quantize_float(lin.weight.astype(np.float16), w.w_format, w.bits, w.group_size)
        return LinearSet({w.bits: fw}, bias)
    if policy.family == "uniform":
        group = WHOLE_ROW if policy.group_size == 0 else int(policy.group_size or 128)
        gw = (quantize_group(lin.weight, policy.prefill_bits, group) if rng is None
              else random_group(lin.weight.shape, policy.prefill_bits, group, rng))
        return LinearSet({policy.prefill_bits: group_weight(gw, device)}, bias)
    parent = max(4, policy.parent_bits)  # the any-precision parent is 4..8 bits (ap3 reads 3 of 4)
    seed = min(SEED_BITS, min(policy_widths(policy)))
    apw = (quantize_anyprec(lin.weight, parent_bits=parent, seed_bits=seed) if rng is None
           else random_anyprec(lin.weight.shape, parent, seed, rng))
    base = anyprec_weight(apw, parent, device)
    return LinearSet({b: base.at_bits(b) for b in range(seed, parent + 1)}, bias)


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
