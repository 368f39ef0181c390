"""Running schedulers over prompt sets and scoring them against fp16: what every search, the learned
scheduler's labels and the evaluation share.

Prompt sets are byte windows of the stdlib corpus (mpsim.tiny.corpus): `train` windows from
the training files (the learned scheduler's data), `val` and `test` from the two halves of the
held-out files, so validation and test never share text. A run scores each sequence's greedy
continuation against fp16's with Rouge-L (bytes and words, mpsim.quality.rouge); a teacher-forced
run also gives bits per byte of the true continuation and next-token agreement with fp16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from mpsim.engine.backends import make_backend
from mpsim.engine.generate import Generation, generate
from mpsim.engine.model import Decoder
from mpsim.engine.quantize import SEED_BITS, policy_widths
from mpsim.engine.scheduler import FixedScheduler, Scheduler
from mpsim.engine.weights import ModelParams
from mpsim.policy import Policy, mean_decode_bits, parse_policy, pmpd_average_bits
from mpsim.quality.rouge import rouge_l, words
from mpsim.tiny.corpus import load_corpus

SPLITS = ("train", "val", "test")
CORPUS_BYTES = {"train": 3_000_000, "heldout": 2_000_000}


@dataclass(frozen=True)
class PromptSet:
    name: str
    prompts: list[list[int]]
    targets: list[list[int]]  # the true next bytes (teacher forcing, bits per byte)


def prompt_set(split: str, samples: int, prompt_len: int, gen_len: int, seed: int = 0) -> PromptSet:
    """`samples` windows of prompt_len + gen_len bytes at seeded, distinct offsets of the split."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    if split == "train":
        data = load_corpus("train", CORPUS_BYTES["train"])
    else:
        held = load_corpus("heldout", CORPUS_BYTES["heldout"])
        mid = len(held) // 2
        data = held[:mid] if split == "val" else held[mid:]
    length = prompt_len + gen_len
    if samples > len(data) - length:
        raise ValueError(f"samples: {samples} windows of {length} bytes do not fit the {split} split")
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.choice(len(data) - length, size=samples, replace=False))
    windows = [data[s:s + length].tolist() for s in starts]
    return PromptSet(split, [w[:prompt_len] for w in windows], [w[prompt_len:] for w in windows])


class DecoderPool:
    """One decoder per distinct quantization (any-precision policies with one parent share it)."""

    def __init__(self, params: ModelParams, backend: str = "reference") -> None:
        self.params, self.backend = params, make_backend(backend)
        self._made: dict[tuple[object, ...], Decoder] = {}

    def get(self, policy: Policy) -> Decoder:
        key = _quant_key(policy)
        if key not in self._made:
            self._made[key] = Decoder(self.params, policy, self.backend)
        return self._made[key]


def _quant_key(p: Policy) -> tuple[object, ...]:
    if p.family == "anyprec":  # mirrors quantize_linear: parent max(4, widest), seed min(2, narrowest)
        return ("anyprec", max(4, p.parent_bits), min(SEED_BITS, min(policy_widths(p))), p.kv_bits)
    return (p.family, p.prefill_bits, p.group_size, p.kv_bits)


@dataclass(frozen=True)
class Fp16Reference:
    continuations: list[list[int]]
    argmax: np.ndarray | None  # (passes, B) fp16 argmax under teacher forcing, when computed


def fp16_reference(pool: DecoderPool, pset: PromptSet, gen_len: int, forced: bool = False) -> Fp16Reference:
    policy = parse_policy("fp16")
    dec = pool.get(policy)
    free = generate(dec, pset.prompts, gen_len, FixedScheduler(policy, name="fp16"))
    argmax = None
    if forced:
        argmax = _forced(dec, FixedScheduler(policy, name="fp16"), pset, gen_len)[1]
    return Fp16Reference(free.tokens, argmax)


@dataclass(frozen=True)
class RunScore:
    """One scheduler on one prompt set: per-sequence scores and widths of the greedy generation."""

    rouge_bytes: np.ndarray   # (B,) Rouge-L over bytes against fp16's continuation
    rouge_words: np.ndarray   # (B,) Rouge-L over whitespace-separated words
    prefill_bits: int
    bits: list[list[int]]     # per sequence: the width of decode steps 1..
    bits_per_byte: float = math.nan
    agreement: float = math.nan

    @property
    def avg_bits_pmpd(self) -> float:
        return pmpd_average_bits(self.bits)

    @property
    def avg_bits_mean(self) -> float:
        return mean_decode_bits(self.bits)


def run_scheduler(decoder: Decoder, scheduler: Scheduler, pset: PromptSet, gen_len: int,
                  ref: Fp16Reference) -> RunScore:
    """Greedy generation under the scheduler; with ref.argmax, also a teacher-forced run."""
    gen = generate(decoder, pset.prompts, gen_len, scheduler)
    rb, rw = rouge_scores(gen, ref)
    if ref.argmax is None:
        return RunScore(rb, rw, gen.prefill_bits, gen.decode_bits)
    bpb, argmax = _forced(decoder, scheduler, pset, gen_len)
    agree = float((argmax == ref.argmax).mean())
    return RunScore(rb, rw, gen.prefill_bits, gen.decode_bits, bpb, agree)


def rouge_scores(gen: Generation, ref: Fp16Reference) -> tuple[np.ndarray, np.ndarray]:
    pairs = list(zip(gen.tokens, ref.continuations, strict=True))
    rb = np.array([rouge_l(c, r) for c, r in pairs])
    rw = np.array([rouge_l(words(bytes(c)), words(bytes(r))) for c, r in pairs])
    return rb, rw


def _forced(decoder: Decoder, scheduler: Scheduler, pset: PromptSet,
            gen_len: int) -> tuple[float, np.ndarray]:
    """Bits per byte of the true continuation under teacher forcing, and every pass's argmax."""
    targets = [t[:gen_len] for t in pset.targets]
    gen = generate(decoder, pset.prompts, gen_len, scheduler, keep_logits=True, forced=targets)
    logits = torch.stack(gen.logits).float()  # (passes, B, V)
    logp = torch.log_softmax(logits, dim=-1)
    tgt = torch.tensor(targets).T  # (passes, B)
    nll = -logp.gather(-1, tgt[..., None]).squeeze(-1)
    return float(nll.mean()) / math.log(2), logits.argmax(-1).numpy()


QUALITY_METRICS = ("rouge_bytes", "rouge_words")


def mean_quality(score: RunScore, metric: str) -> float:
    if metric not in QUALITY_METRICS:
        raise ValueError(f"quality metric: expected one of {QUALITY_METRICS}, got {metric!r}")
    return float(np.mean(score.rouge_bytes if metric == "rouge_bytes" else score.rouge_words))


class Runner:
    """Runs on one prompt set against one fp16 reference; fixed-policy runs are cached by spelling."""

    def __init__(self, pool: DecoderPool, pset: PromptSet, gen_len: int, *, forced: bool = False) -> None:
        self.pool, self.pset, self.gen_len = pool, pset, gen_len
        self.ref = fp16_reference(pool, pset, gen_len, forced)
        self._fixed: dict[str, RunScore] = {}

    def fixed(self, spelling: str) -> RunScore:
        if spelling not in self._fixed:
            policy = parse_policy(spelling)
            self._fixed[spelling] = self.run(FixedScheduler(policy, name=spelling), policy)
        return self._fixed[spelling]

    def run(self, scheduler: Scheduler, policy: Policy) -> RunScore:
        """`policy` picks the decoder (its quantization); the scheduler picks each pass's width."""
        return run_scheduler(self.pool.get(policy), scheduler, self.pset, self.gen_len, self.ref)
