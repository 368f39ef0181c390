"""The one weight-only linear layer: typed weight containers per format and `linear`, which dispatches.

`linear(x, weight, bias)` asks launch_config.gemm_config for the path (GEMV with split-K for few
rows, tiled GEMM for many) from the shape and the weight's format, and calls that format's launcher
with the config, so the engine, the trace synthesizer and the simulator see the same choice.
The containers hold torch tensors already on the kernel device; mpsim/engine/kernel_weights.py
converts the numpy weights that reference/ quantizes into them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import torch

from mpsim.kernels.gemm_anyprec import (
    LUT_OR_MAX_BITS,
    PAIR_MAX_BITS,
    gemm_anyprec,
    lut_word_table,
    pair_exp,
    pair_table,
)
from mpsim.kernels.gemm_fp16 import gemm_fp16
from mpsim.kernels.gemm_group import GROUP_BITS, gemm_group, scale_zero_words
from mpsim.kernels.launch_config import LaunchConfig
from mpsim.kernels.lut_words import LUT_WORDS_BITS
from mpsim.kernels.table_rows import rows_aligned


@dataclass(frozen=True)
class Fp16Weight:
    """A plain fp16 weight (N, K), y = x @ weight.T."""

    weight: torch.Tensor

    w_format = "fp16"
    bits = 16
    group_size = None

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])


@dataclass(frozen=True)
class GroupWeight:
    """A uniform group-quantized weight (docs/formats.md); group_size is the resolved G."""

    qweight: torch.Tensor  # int32 (N, KP*bits/32)
    scales: torch.Tensor  # fp16 (N, KP/G)
    zeros: torch.Tensor  # fp16 (N, KP/G), integer code values
    bits: int
    group_size: int
    in_features: int  # K before padding
    # int32 (N, KP/G): scale_zero_words(scales, zeros), the words the W_hat loops read (kernels/
    # sz_words.py): built here, once, when the weight is loaded (None)
    sz: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.bits not in GROUP_BITS:
            raise ValueError(f"bits: expected one of {GROUP_BITS}, got {self.bits!r}")
        if self.sz is None:
            object.__setattr__(self, "sz", scale_zero_words(self.scales, self.zeros))

    @property
    def w_format(self) -> str:
        return f"int{self.bits}-group"

    @property
    def out_features(self) -> int:
        return int(self.qweight.shape[0])


@dataclass(frozen=True)
class AnyPrecWeight:
    """Any-precision weight read at `bits`: parent bit-planes and the LUTs of every readable width."""

    qweight: torch.Tensor  # int32 (P, N, KP/32), plane 0 = MSB
    luts: Mapping[int, torch.Tensor] = field(repr=False)  # b -> fp16 (N, 2^b)
    bits: int
    in_features: int  # K before padding
    # b -> the pair table of luts[b] (gemm_anyprec.pair_table), b <= PAIR_MAX_BITS: built here, once,
    # when the weight is loaded (None), and shared by at_bits' copies
    pairs: Mapping[int, torch.Tensor] | None = field(default=None, repr=False)
    # b -> pair_exp(pairs[b]) (the one-row GEMV's x scale 2^-E, gemm_anyprec.pair_exp): with pairs
    pair_exps: Mapping[int, int] | None = field(default=None, repr=False)
    # b -> the LUT's 32-bit words (gemm_anyprec.lut_word_table), b in LUT_WORDS_BITS: the 2..16-row
    # and tiled paths read them (kernels/lut_words.py); built here, once, like pairs
    lut_words: Mapping[int, torch.Tensor] | None = field(default=None, repr=False)

    w_format = "anyprec"
    group_size = None

    def __post_init__(self) -> None:
        if self.bits not in self.luts:
            raise ValueError(f"bits: expected one of the stored LUT widths {sorted(self.luts)}, "
                             f"got {self.bits!r}")
        # the LUTs the kernels address by OR, rows at multiples of their size (kernels/table_rows.py)
        object.__setattr__(self, "luts", {b: rows_aligned(t) if b <= LUT_OR_MAX_BITS else t
                                          for b, t in self.luts.items()})
        if self.pairs is None:
            object.__setattr__(self, "pairs", {b: pair_table(t) for b, t in self.luts.items()
                                               if b <= PAIR_MAX_BITS})
        if self.pair_exps is None:
            assert self.pairs is not None
            object.__setattr__(self, "pair_exps", {b: pair_exp(t) for b, t in self.pairs.items()})
        if self.lut_words is None:
            object.__setattr__(self, "lut_words", {b: lut_word_table(t) for b, t in self.luts.items()
                                                   if b in LUT_WORDS_BITS})

    @property
    def parent_bits(self) -> int:
        return int(self.qweight.shape[0])

    @property
    def out_features(self) -> int:
        return int(self.qweight.shape[1])

    def at_bits(self, bits: int) -> AnyPrecWeight:
        """The same parent weight read at another width (no copy: fewer planes are read)."""
        return replace(self, bits=bits)


Weight = Fp16Weight | GroupWeight | AnyPrecWeight


def linear(x: torch.Tensor, weight: Weight, bias: torch.Tensor | None = None, *,
           config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ W.T (+ bias) for x fp16 (..., K) and any weight container -> fp16 (..., N).

    The launch config is the launcher's choice (gemm_common.run_gemm: the heuristic gemm_config,
    or on a GPU the autotuned fastest candidate) unless `config` forces one."""
    if not isinstance(weight, (Fp16Weight, GroupWeight, AnyPrecWeight)):
        raise ValueError(f"weight: expected Fp16Weight, GroupWeight or AnyPrecWeight, "
                         f"got {type(weight).__name__}")
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x: expected an fp16 tensor of shape (..., K), got {x!r:.80}")
    if x.shape[-1] != weight.in_features:
        raise ValueError(f"x: expected K={weight.in_features} (the weight's in_features) on the "
                         f"last axis, got shape {tuple(x.shape)}")
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    n = weight.out_features
    if isinstance(weight, Fp16Weight):
        y = gemm_fp16(x2, weight.weight, bias, config=config)
    elif isinstance(weight, GroupWeight):
        y = gemm_group(x2, weight.qweight, weight.scales, weight.zeros, bits=weight.bits,
                       group_size=weight.group_size, bias=bias, config=config, sz=weight.sz)
    else:
        pairs = weight.pairs.get(weight.bits) if weight.pairs is not None else None
        e = weight.pair_exps.get(weight.bits) if weight.pair_exps is not None else None
        words = weight.lut_words.get(weight.bits) if weight.lut_words is not None else None
        y = gemm_anyprec(x2, weight.qweight, weight.luts[weight.bits], bits=weight.bits,
                         pairs=pairs, pair_exp=e, bias=bias, config=config, lut_words=words)
    return y.reshape(*x.shape[:-1], n)
