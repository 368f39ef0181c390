"""The serving configuration: scheduler knobs, pricing buckets, SLOs, and where each default comes from.

Scheduler defaults are vLLM's engine defaults (vllm/engine/arg_utils.py, EngineArgs: block_size 16,
gpu_memory_utilization 0.90, max_num_seqs 256; the admission watermark of 1% of the KV blocks is its
block manager's default), except `max_num_batched_tokens`, which defaults to the model's context
length so that any prompt within the context is one chunk when the engine is otherwise idle (vLLM's
own default depends on its version and entry point). docs/serving.md lists them with their sources.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.sim.protocols import get_protocol
from mpsim.traces.schema import DEFAULT_ENGINE

MIXED_PRECISION = ("per-group", "highest")
PRICING = ("auto", "components", "iterations")


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 256                     # sequences in one iteration (vLLM default)
    max_num_batched_tokens: int | None = None   # tokens in one iteration; None: the context length
    block_size: int = 16                        # KV tokens per paged block (vLLM default)
    chunked_prefill: bool = True                # False: prefill-first (vLLM's V0 default scheduler)
    gpu_memory_utilization: float = 0.90        # share of device memory the engine may use (vLLM)
    watermark: float = 0.01                     # share of KV blocks kept free at admission (vLLM)
    num_kv_blocks: int | None = None            # override the capacity (vLLM num_gpu_blocks_override)
    mixed_precision: str = "per-group"          # GEMMs of a batch: one launch per precision group,
                                                # or every token at the highest precision present

    def __post_init__(self) -> None:
        for key in ("max_num_seqs", "block_size"):
            if getattr(self, key) < 1:
                raise MpsimInputError(f"--{key.replace('_', '-')} must be >= 1, got {getattr(self, key)}")
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise MpsimInputError(f"--max-num-batched-tokens {self.max_num_batched_tokens} must be >= "
                                  f"--max-num-seqs {self.max_num_seqs} (every running sequence decodes "
                                  "one token per iteration)")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise MpsimInputError(f"--gpu-memory-utilization must be in (0, 1], got "
                                  f"{self.gpu_memory_utilization}")
        if not 0 <= self.watermark < 1:
            raise MpsimInputError(f"--watermark must be in [0, 1), got {self.watermark}")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise MpsimInputError(f"--num-kv-blocks must be >= 1, got {self.num_kv_blocks}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise MpsimInputError(f"--mixed-precision {self.mixed_precision!r}: expected one of "
                                  f"{', '.join(MIXED_PRECISION)}")

    def budget(self, context_len: int | None) -> int:
        """Tokens per iteration: the flag, else the context length (else 4096 for unknown models)."""
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        return max(self.max_num_seqs, context_len or DEFAULT_BUDGET)


DEFAULT_BUDGET = 4096


@dataclass(frozen=True)
class Buckets:
    """How an iteration's shape is rounded or interpolated when it is priced (docs/serving.md
    measures the error this adds).

    Token counts above 16 (a GEMM's rows, the T tokens of the row-wise launches, the S sampled rows,
    a prefill chunk, the decode batch) fall in segments of `step` = max(floor, 2^(floor(log2 x) -
    token_bits)) tokens (floor: 64 rows, the GEMM tile, for GEMMs, so a segment holds one tile
    count; a GEMM's 17..64 is split at 32, where the token tile of cuBLAS's heuristic switches;
    16 otherwise; never reaching down into the GEMV rows, 16 and below, which are exact):
    at most 1/16 of x wide with the default token_bits 4. KV lengths (decode attention's mean per
    sequence, a prefill chunk's cached tokens) fall in whole KV tiles of `kv_tile` (the decode
    kernel's BLOCK_N; the simulator rounds decode attention up to the same tile, so there it is
    flat); the longest KV, which only sets the decode grid, is rounded up to a tile. A component is
    priced at its segments' ends and interpolated linearly between them. `enabled=False` prices
    every shape exactly.
    """

    enabled: bool = True
    kv_tile: int = 64
    gemm_tile: int = 64
    token_bits: int = 4
    # 1 where the engine's decode kernel steps when the KV length reaches a multiple of its tile (its
    # tiles cover the cached tokens plus the new one: TensorRT-LLM's XQA and MMHA); the KV tiles are
    # then [k x tile, (k + 1) x tile - 1], so no tile holds a step (0: (k x tile, (k + 1) x tile])
    kv_phase: int = 0

    def step(self, x: int, floor_step: int = 16) -> int:
        return max(floor_step, 1 << max(0, x.bit_length() - 1 - self.token_bits))

    def tokens(self, x: int, floor_step: int = 16) -> int:
        """x rounded up to its step (x itself up to 16, or when disabled)."""
        if not self.enabled or x <= 16:
            return x
        step = self.step(x, floor_step)
        return -(-x // step) * step

    def segment(self, x: int, floor_step: int = 16) -> tuple[int, int]:
        """The ends (lo, hi) of the segment x is interpolated in: (x, x) up to 16 or when disabled."""
        if not self.enabled or x <= 16:
            return x, x
        if floor_step > 32 and x <= floor_step:  # a GEMM: the token tile of cuBLAS's / TRT-LLM's
            return (17, 32) if x <= 32 else (33, floor_step)  # fp8 rule switches at 32 (16..128)
        hi = self.tokens(x, floor_step)
        return max(17, hi - self.step(x, floor_step) + 1), hi  # never across 16 (GEMV below)

    def kv(self, x: int) -> int:
        """x rounded up to the end of its KV tile (`kv_phase`: tile ends one before a multiple)."""
        ph = self.kv_phase
        return -(-(x + ph) // self.kv_tile) * self.kv_tile - ph if self.enabled else x

    def kv_segment(self, x: float) -> tuple[int, int]:
        """The whole KV tile x lies in, [tile start + 1, tile end] (0 and disabled: x itself)."""
        if not self.enabled or x <= 0:
            return int(x), int(x)
        hi = self.kv(math.ceil(x))
        return hi - self.kv_tile + 1, hi


@dataclass(frozen=True)
class Slo:
    """Service-level objectives per request; None = not set."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self) -> None:
        for key in ("ttft_s", "tpot_s"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise MpsimInputError(f"SLO {key}: must be > 0, got {value}")

    @property
    def given(self) -> bool:
        return self.ttft_s is not None or self.tpot_s is not None


@dataclass(frozen=True)
class IterationProtocols:
    """The measurement protocol an iteration runs under: a serving engine replays decode iterations
    as CUDA graphs (`graph`) and runs iterations with a prefill (chunk) eagerly (`eager`). An
    iteration is one measured call of its launches; what that costs is the protocol's
    (mpsim/sim/protocols.py), asked by the pricer (mpsim/serve/pricing.py). The per-iteration host
    overhead is 0 by default and settable (`mpsim serve --host-overhead-us`)."""

    decode: str = "graph"         # protocol of decode-only iterations
    prefill: str = "eager"        # protocol of iterations holding any prefill tokens
    host_overhead_s: float = 0.0  # scheduler/host time per iteration (not overlapped with the GPU)

    def __post_init__(self) -> None:
        for name in (self.decode, self.prefill):
            get_protocol(name)  # an unknown name lists the valid ones
        if not self.host_overhead_s >= 0:
            raise MpsimInputError(f"host overhead must be >= 0, got {self.host_overhead_s}")

    def name(self, has_prefill: bool) -> str:
        return self.prefill if has_prefill else self.decode


@dataclass(frozen=True)
class ServeConfig:
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    slo: Slo = field(default_factory=Slo)
    perf_model: str = "sim"
    protocol: IterationProtocols = field(default_factory=IterationProtocols)
    buckets: Buckets = field(default_factory=Buckets)
    warmup_frac: float = 0.0     # share of requests (by arrival) left out of steady-state figures
    cooldown_frac: float = 0.0
    allow_beyond_context: bool = False
    pricing: str = "auto"        # components | iterations | auto (mpsim/serve/pricing.py)
    engine: str = DEFAULT_ENGINE  # whose kernels run the iterations (mpsim/engines, --engine)
    tp: int = 1                  # tensor-parallel degree (mpsim/parallel.py, --tp)
    pp: int = 1                  # pipeline stages (--pp)
    quant_method: str | None = None  # the checkpoint's quantization method (--quant-method)

    def __post_init__(self) -> None:
        for key in ("tp", "pp"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MpsimInputError(f"--{key} {value!r}: expected a whole number >= 1")
        for key in ("warmup_frac", "cooldown_frac"):
            value = getattr(self, key)
            if not 0 <= value < 1:
                raise MpsimInputError(f"--{key.replace('_', '-')} must be in [0, 1), got {value}")
        if self.pricing not in PRICING:
            raise MpsimInputError(f"--pricing {self.pricing!r}: expected one of {', '.join(PRICING)}")
        if self.warmup_frac + self.cooldown_frac >= 1:
            raise MpsimInputError("--warmup-frac + --cooldown-frac must leave some requests (< 1)")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
