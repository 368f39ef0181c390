"""Precision policies: which weight format/bits and KV bits every launch of a generation uses.

Grammar (docs/design.md#policies):
    policy  := weights [ "+kv8" | "+kv4" | "+kv8f" ]   int8 / int4 KV (fp16 scale and zero per
                                                       token and head), or fp8 e4m3 KV (per-tensor scale)
    weights := "fp16"
             | "w" B [ "g" G | "grow" ]          uniform group quantization, B in 8,4,3,2, G default 128
             | "ap" B                            any-precision at one width, B in 2..8
             | "ap" P "-" D                      phase-aware: prefill at P bits, all decode at D
             | "ap" P "-" D1 "@" S1 "-" D2 ...   progressive: decode steps 1..S1 at D1, then D2, ...
             | "fp8" [ "grow" ]                  W8A8 e4m3: one per-tensor weight scale (grow: one per
                                                 output row), dynamic per-token activation scales
             | "fp8b"                            W8A8 e4m3, 128x128 weight blocks, 1x128 activation groups
             | "nvfp4" | "mxfp4"                 e2m1 weights, e4m3 scale per 16 (+ fp32 per tensor) /
                                                 e8m0 scale per 32; activations as the device runs them
Only decoder-block linears follow the policy; embeddings and lm_head stay fp16.

Phase-aware and progressive forms exist only where ONE stored weight serves every phase: the
any-precision parent's nested bit planes (reading fewer planes is a lower width, no second copy).
Floating-point weights (fp8, fp8b, nvfp4, mxfp4) and uniform groups have no nested form: a second
precision would be a second weight copy in memory, so such a spelling is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Literal

from mpsim.errors import MpsimInputError

GRAMMAR = (
    "policy := fp16 | w{8,4,3,2}[g{G}|grow] | ap{b} | ap{p}-{d} | ap{p}-{d1}@{S1}-{d2}[@{S2}-{d3}...] "
    "| fp8 | fp8grow | fp8b | nvfp4 | mxfp4, optionally followed by +kv8 or +kv4 (int KV) or +kv8f "
    "(fp8 e4m3 KV) (e.g. fp16, w4, w4g64, ap3, ap4-3, ap4-4@85-3, ap4-4@40-3@80-2, w4+kv8, "
    "fp8+kv8f, nvfp4); phase-aware/progressive forms are any-precision only (one stored weight)"
)
UNIFORM_BITS = (8, 4, 3, 2)
ANYPREC_BITS = range(2, 9)
DEFAULT_GROUP = 128
Family = Literal["fp16", "uniform", "anyprec", "float"]
# Floating-point weight spellings -> (trace w_format, stored bits, group_size as the trace spells it:
# traces/schema.py W_FORMATS; fp8 None = per-tensor scale, 0 = per output row)
FLOAT_WEIGHTS: dict[str, tuple[str, int, int | None]] = {
    "fp8": ("fp8", 8, None), "fp8grow": ("fp8", 8, 0), "fp8b": ("fp8-block", 8, 128),
    "nvfp4": ("nvfp4", 4, 16), "mxfp4": ("mxfp4", 4, 32),
}
FLOAT_FORMATS = ("fp8", "fp8-block", "nvfp4", "mxfp4")  # their trace w_formats
# KV suffixes -> (bits, the trace's kv_format: traces/schema.py KV_FORMATS)
KV_SUFFIXES: dict[str, tuple[int, str]] = {"": (16, "fp16"), "8": (8, "int8"), "4": (4, "int4"),
                                           "8f": (8, "fp8-e4m3")}


@dataclass(frozen=True)
class WeightChoice:
    """The format a decoder-block linear is stored and read in, as the trace columns spell it."""

    w_format: str
    bits: int
    group_size: int | None


FP16_WEIGHTS = WeightChoice("fp16", 16, None)


@dataclass(frozen=True)
class Policy:
    spelling: str
    family: Family
    prefill_bits: int
    decode_schedule: tuple[tuple[int, int], ...]  # (first decode step, bits), first step is 1
    group_size: int | None = None  # uniform: G (0 = whole row); float: FLOAT_WEIGHTS' group_size
    kv_bits: int = 16
    kv_format: str = "fp16"  # traces/schema.py KV_FORMATS: fp16, int8, int4, fp8-e4m3
    float_format: str | None = None  # family "float": the trace's w_format (fp8, fp8-block, nvfp4, mxfp4)

    def decode_bits(self, step: int) -> int:
        """Weight bits of decode step `step` (1-based: the pass after prefill is step 1)."""
        bits = self.decode_schedule[0][1]
        for first, b in self.decode_schedule:
            if step >= first:
                bits = b
        return bits

    def bits_at(self, phase: str, step: int) -> int:
        return self.prefill_bits if phase == "prefill" else self.decode_bits(step)

    def weights_at(self, phase: str, step: int) -> WeightChoice:
        """The decoder-block linear format of a pass (lm_head and embeddings are always fp16)."""
        bits = self.bits_at(phase, step)
        if self.family == "fp16":
            return FP16_WEIGHTS
        if self.family == "anyprec":
            return WeightChoice("anyprec", bits, None)
        if self.family == "float":
            assert self.float_format is not None
            return WeightChoice(self.float_format, bits, self.group_size)
        return WeightChoice(f"int{bits}-group", bits, self.group_size)

    @property
    def kv_suffix(self) -> str:
        """The engine-file key of the policy's KV cache: kv16, kv8, kv4, kv8f."""
        suffix = next(k for k, v in KV_SUFFIXES.items() if v == (self.kv_bits, self.kv_format))
        return f"kv{suffix or 16}"

    @property
    def parent_bits(self) -> int:
        """The widest precision the policy reads (the any-precision parent model it needs)."""
        return max([self.prefill_bits] + [b for _, b in self.decode_schedule])

    def __str__(self) -> str:
        return self.spelling


_KV = re.compile(r"^(?P<w>.+?)(?:\+kv(?P<kv>\d+f?))?$")
_UNIFORM = re.compile(r"^w(?P<b>\d+)(?:g(?P<g>\d+|row))?$")
_ANYPREC = re.compile(r"^ap(?P<p>\d+)(?P<rest>(?:-\d+(?:@\d+-\d+)*)?)$")
_FLOAT_PHASED = re.compile(r"^(?:" + "|".join(sorted(FLOAT_WEIGHTS, key=len, reverse=True)) + r")[-@]")
_UNIFORM_PHASED = re.compile(r"^w\d+(?:g(?:\d+|row))?[-@]")


def parse_policy(text: str) -> Policy:
    """Parse a policy spelling; a bad one is an MpsimInputError that shows the grammar."""
    spelling = text.strip()
    m = _KV.match(spelling)
    if not m:
        raise _bad(text, "empty policy")
    kv_bits, kv_format = _kv(text, m.group("kv"))
    weights = m.group("w")
    if weights == "fp16":
        policy = Policy(spelling, "fp16", 16, ((1, 16),), None, kv_bits)
    elif weights in FLOAT_WEIGHTS:
        fmt, bits, group = FLOAT_WEIGHTS[weights]
        policy = Policy(spelling, "float", bits, ((1, bits),), group, kv_bits, float_format=fmt)
    elif (u := _UNIFORM.match(weights)) is not None:
        policy = _uniform(text, spelling, u, kv_bits)
    elif (a := _ANYPREC.match(weights)) is not None:
        policy = _anyprec(text, spelling, a, kv_bits)
    elif _FLOAT_PHASED.match(weights) or _UNIFORM_PHASED.match(weights):
        raise _bad(text, f"{weights!r}: a phase-aware or progressive form needs one stored weight that "
                         "serves every phase (any-precision's nested bit planes: ap{p}-{d}); "
                         "fp8/fp4 and uniform-group weights would need a second weight copy")
    else:
        raise _bad(text, f"{weights!r} is not a weight spelling")
    return replace(policy, kv_format=kv_format)


def _bad(text: str, why: str) -> MpsimInputError:
    return MpsimInputError(f"bad policy {text!r}: {why}. Grammar: {GRAMMAR}")


def _kv(text: str, kv: str | None) -> tuple[int, str]:
    """(bits, kv_format) of a KV suffix: none fp16, 8 int8, 4 int4, 8f fp8 e4m3."""
    if kv is None:
        return KV_SUFFIXES[""]
    if kv not in KV_SUFFIXES or not kv:
        raise _bad(text, f"KV cache must be +kv8, +kv4 (int) or +kv8f (fp8 e4m3), got +kv{kv}")
    return KV_SUFFIXES[kv]


def _uniform(text: str, spelling: str, m: re.Match[str], kv_bits: int) -> Policy:
    bits = int(m.group("b"))
    if bits not in UNIFORM_BITS:
        raise _bad(text, f"uniform weight bits must be one of {UNIFORM_BITS}, got {bits}")
    g = m.group("g")
    group = DEFAULT_GROUP if g is None else (0 if g == "row" else int(g))
    if g not in (None, "row") and (group < 32 or group % 32):
        raise _bad(text, f"group size must be a multiple of 32 (or 'row'), got {group}")
    return Policy(spelling, "uniform", bits, ((1, bits),), group, kv_bits)


def _anyprec(text: str, spelling: str, m: re.Match[str], kv_bits: int) -> Policy:
    prefill = int(m.group("p"))
    rest = m.group("rest")
    if not rest:
        schedule: tuple[tuple[int, int], ...] = ((1, prefill),)
    else:
        parts = rest[1:].split("@")  # "4", "85-3", ...
        schedule = ((1, int(parts[0])),)
        for part in parts[1:]:
            step, bits = (int(x) for x in part.split("-"))
            schedule += ((step + 1, bits),)
    _check_anyprec(text, prefill, schedule)
    return Policy(spelling, "anyprec", prefill, schedule, None, kv_bits)


def _check_anyprec(text: str, prefill: int, schedule: tuple[tuple[int, int], ...]) -> None:
    widths = [prefill] + [b for _, b in schedule]
    for b in widths:
        if b not in ANYPREC_BITS:
            raise _bad(text, f"any-precision bits must be in 2..8, got {b}")
    if any(later > earlier for earlier, later in pairwise(widths)):
        raise _bad(text, f"precision must not rise during a generation, got {widths}")
    firsts = [s for s, _ in schedule]
    if any(b <= a for a, b in pairwise(firsts)):
        raise _bad(text, "switch steps must increase")


def pmpd_average_bits(decode_bits_per_step: list[list[int]]) -> float:
    """PMPD's count: per sample, the mean over decode passes 2..n; then the mean over samples."""
    per_sample = [sum(s[1:]) / len(s[1:]) for s in decode_bits_per_step if len(s) > 1]
    return sum(per_sample) / len(per_sample) if per_sample else float("nan")


def mean_decode_bits(decode_bits_per_step: list[list[int]]) -> float:
    """Plain weighted mean over every decode pass of every sample (steps 1..n)."""
    flat = [b for s in decode_bits_per_step for b in s]
    return sum(flat) / len(flat) if flat else float("nan")
