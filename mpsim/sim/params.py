"""The simulator's own constants: work per weight, per score and per loop trip, and coarsening limits.

Hardware numbers live in hw_models/ files; these are properties of the kernels and of the model's
approximations, named and documented here (docs/simulator.md), so no function hides a magic number.
They are part of every memo key: change one and the cached results are recomputed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# CUDA-core integer instructions per weight to turn stored codes into fp16 (a well-vectorized kernel:
# shifts and masks on 32-bit words, the 0x6400 magic-number convert and one fused scale/zero FMA on
# fp16x2 pairs). Any-precision assembles one bit per plane and looks the code up in a per-row LUT.
GROUP_DEQUANT_OPS: dict[int, float] = {8: 1.5, 4: 1.5, 3: 2.0, 2: 1.5}
ANYPREC_OPS_PER_PLANE = 0.75
ANYPREC_LUT_OPS = 1.0


@dataclass(frozen=True)
class SimParams:
    """Kernel-work constants and approximation limits. Defaults are the shipped model."""

    group_dequant_ops: dict[int, float] = field(default_factory=lambda: dict(GROUP_DEQUANT_OPS))
    anyprec_ops_per_plane: float = ANYPREC_OPS_PER_PLANE
    anyprec_lut_ops: float = ANYPREC_LUT_OPS
    # fp32 lane-ops per attention score: scale, max, subtract, exp2 (~4 on the SFU path), sum.
    softmax_ops_per_score: float = 8.0
    # KV dequant per cached element: unpack + one FMA with the token's scale/zero.
    kv_dequant_ops: float = 2.0
    # Per K-loop trip of a CTA: address arithmetic, barrier, loop control (not hidden by other warps).
    iter_overhead_cycles: float = 24.0
    # Share of L2 that holds reused data (the rest: streaming lines, set conflicts, two partitions).
    l2_usable_fraction: float = 0.75
    # DRAM address interleave: a request of B bytes spreads over min(channels, B / stripe) channels.
    dram_stripe_bytes: int = 256
    # Coarsening (docs/simulator.md): K-loop trips simulated per bundle, waves and CTA classes kept.
    max_iters: int = 48
    max_waves: int = 6
    max_classes: int = 8
    # NPU: vector ops per GEMM output element (bias, cast); the DMA/compute granularity inside a
    # double-buffered SRAM half (a sub-buffer lands, then the decoder and MAC array consume it).
    npu_epilogue_ops: float = 2.0
    npu_tile_bytes: int = 128 * 1024
    # NPU step model: the DMA run-ahead window (the weight SRAM of all cores) is filled in chunks of
    # at most 1/npu_window_chunks of it (simulation granularity; the last chunk of an operator is
    # one DMA tile per core, so the compute exposed after a stream is one tile's); an operator's
    # stream is at least npu_min_chunks chunks (or whole tiles), so its compute overlaps it, and at
    # most npu_max_chunks (longer streams coarsen: a chunk then holds one window share of SRAM).
    npu_window_chunks: int = 4
    npu_min_chunks: int = 8
    npu_max_chunks: int = 64

    def fingerprint(self) -> str:
        """A stable hash of every field (part of the memo key)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


DEFAULT_PARAMS = SimParams()
