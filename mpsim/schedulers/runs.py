"""Running schedulers over prompt sets and scoring them against fp16: what every search, the learned
scheduler's labels and the evaluation share.

Prompt sets (mpsim.engine.prompts.PromptSet) are either byte windows of the stdlib corpus
(mpsim.tiny.corpus, the tiny model's): `train` windows from the training files (the learned
scheduler's data), `val` and `test` from the two halves of the held-out files, so validation and test
never share text; or a user's JSONL prompt file, tokenized for the model (`file_prompt_set`).
A run scores each sequence's greedy continuation (EOS dropped) against fp16's with Rouge-L (over
tokens, which are bytes for the tiny model, and words, mpsim.quality.rouge) and, when the prompts
have references, against those; a teacher-forced run also gives bits per token of the true
continuation (the stdlib windows) or of fp16's own continuation (prompt files), and next-token
agreement with fp16.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mpsim.engine.backends import make_backend
from mpsim.engine.checkpoint import TextModel
from mpsim.engine.generate import Generation, generate
from mpsim.engine.model import Decoder
from mpsim.engine.prompts import PromptSet
from mpsim.engine.quantize import SEED_BITS, policy_widths
from mpsim.engine.scheduler import FixedScheduler, Scheduler
from mpsim.engine.weights import ModelParams
from mpsim.policy import Policy, mean_decode_bits, parse_policy, pmpd_average_bits
from mpsim.quality.rouge import rouge_l
from mpsim.tiny.corpus import load_corpus

SPLITS = ("train", "val", "test")
CORPUS_BYTES = {"train": 3_000_000, "heldout": 2_000_000}


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
    """One decoder per distinct quantization (any-precision policies with one parent share it), from
    fp16 weights (quantized at load) or a TextModel (which may read a quantized folder)."""

    def __init__(self, model: ModelParams | TextModel, backend: str = "reference") -> None:
        self.model, self.backend = model, make_backend(backend)
        self._made: dict[tuple[object, ...], Decoder] = {}

    def get(self, policy: Policy) -> Decoder:
        key = _quant_key(policy)
        if key not in self._made:
            m = self.model
            self._made[key] = (m.decoder(policy, self.backend) if isinstance(m, TextModel)
                               else Decoder(m, policy, self.backend))
        return self._made[key]


def _quant_key(p: Policy) -> tuple[object, ...]:
    if p.family == "anyprec":  # mirrors quantize_linear: parent max(4, widest), seed min(2, narrowest)
        return ("anyprec", max(4, p.parent_bits), min(SEED_BITS, min(policy_widths(p))), p.kv_bits)
    return (p.family, p.prefill_bits, p.group_size, p.kv_bits)


@dataclass(frozen=True)
class Fp16Reference:
    continuations: list[list[int]]  # greedy fp16 continuations, EOS dropped
    argmax: np.ndarray | None  # (passes, B) fp16 argmax under teacher forcing, when computed
    forced: list[list[int]] | None = None  # the teacher-forced tokens (true text, or fp16's own)
    mask: np.ndarray | None = None  # (passes, B) True where a forced position is real text


def continuations(gen: Generation, pset: PromptSet) -> list[list[int]]:
    """Each sequence's new tokens without a final EOS."""
    return [t[:-1] if t and t[-1] in pset.eos else t for t in gen.tokens]


def forced_targets(pset: PromptSet, free: list[list[int]],
                   gen_len: int) -> tuple[list[list[int]], np.ndarray]:
    """Tokens to teacher-force (the true continuation, else fp16's own) padded to gen_len, and the mask
    of real positions (passes, B)."""
    texts = [t[:gen_len] for t in pset.targets] if pset.targets is not None else free
    mask = np.zeros((gen_len, len(texts)), dtype=bool)
    padded = []
    for i, t in enumerate(texts):
        mask[: len(t), i] = True
        padded.append(list(t) + [t[-1] if t else pset.prompts[i][-1]] * (gen_len - len(t)))
    return padded, mask


def fp16_reference(pool: DecoderPool, pset: PromptSet, gen_len: int, forced: bool = False) -> Fp16Reference:
    policy = parse_policy("fp16")
    dec = pool.get(policy)
    free = continuations(generate(dec, pset.prompts, gen_len, FixedScheduler(policy, name="fp16"),
                                  eos=pset.eos), pset)
    if not forced:
        return Fp16Reference(free, None)
    targets, mask = forced_targets(pset, free, gen_len)
    argmax = _forced(dec, FixedScheduler(policy, name="fp16"), pset.prompts, targets, mask, gen_len)[1]
    return Fp16Reference(free, argmax, targets, mask)


@dataclass(frozen=True)
class RunScore:
    """One scheduler on one prompt set: per-sequence scores and widths of the greedy generation."""

    rouge_bytes: np.ndarray   # (B,) Rouge-L over tokens (bytes for the tiny model) against fp16's
    rouge_words: np.ndarray   # (B,) Rouge-L over whitespace-separated words
    prefill_bits: int
    bits: list[list[int]]     # per sequence: the width of decode steps 1..
    bits_per_byte: float = math.nan  # bits per token of the forced text (bytes for the tiny model)
    agreement: float = math.nan
    ref_rouge_tokens: np.ndarray | None = None  # (B,) against the prompts' references (NaN: none)
    ref_rouge_words: np.ndarray | None = None

    @property
    def avg_bits_pmpd(self) -> float:
        return pmpd_average_bits(self.bits)

    @property
    def avg_bits_mean(self) -> float:
        return mean_decode_bits(self.bits)


def run_scheduler(decoder: Decoder, scheduler: Scheduler, pset: PromptSet, gen_len: int,
                  ref: Fp16Reference) -> RunScore:
    """Greedy generation under the scheduler; with ref.argmax, also a teacher-forced run."""
    gen = generate(decoder, pset.prompts, gen_len, scheduler, eos=pset.eos)
    got = continuations(gen, pset)
    rb, rw = rouge_scores(got, ref.continuations, pset.words)
    refs = reference_scores(got, pset)
    if ref.argmax is None or ref.forced is None or ref.mask is None:
        return RunScore(rb, rw, gen.prefill_bits, gen.decode_bits, ref_rouge_tokens=refs[0],
                        ref_rouge_words=refs[1])
    bpb, argmax = _forced(decoder, scheduler, pset.prompts, ref.forced, ref.mask, gen_len)
    agree = float((argmax == ref.argmax)[ref.mask].mean())
    return RunScore(rb, rw, gen.prefill_bits, gen.decode_bits, bpb, agree, refs[0], refs[1])


def rouge_scores(got: list[list[int]], want: list[list[int]],
                 words: Callable[[list[int]], list[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Rouge-L of each continuation against its counterpart over tokens and over words."""
    pairs = list(zip(got, want, strict=True))
    return (np.array([rouge_l(c, r) for c, r in pairs]),
            np.array([rouge_l(words(c), words(r)) for c, r in pairs]))


def reference_scores(got: list[list[int]], pset: PromptSet) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Rouge-L against the prompts' references (NaN for a prompt without one); None when none has."""
    if pset.references is None:
        return None, None
    pairs = list(zip(got, pset.references, strict=True))
    tok = np.array([math.nan if r is None else rouge_l(c, r) for c, r in pairs])
    wrd = np.array([math.nan if r is None else rouge_l(pset.words(c), pset.words(r)) for c, r in pairs])
    return tok, wrd


def _forced(decoder: Decoder, scheduler: Scheduler, prompts: list[list[int]], targets: list[list[int]],
            mask: np.ndarray, gen_len: int) -> tuple[float, np.ndarray]:
    """Bits per token of the forced text (masked positions only) and every pass's argmax."""
    gen = generate(decoder, prompts, gen_len, scheduler, keep_logits=True, forced=targets)
    logits = torch.stack(gen.logits).float()  # (passes, B, V)
    logp = torch.log_softmax(logits, dim=-1)
    tgt = torch.tensor(targets).T  # (passes, B)
    nll = -logp.gather(-1, tgt[..., None]).squeeze(-1)
    return float(nll[torch.from_numpy(mask)].mean()) / math.log(2), logits.argmax(-1).numpy()


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
