"""Output quality of a policy against fp16 on held-out text, the way PMPD measures it.

For each held-out window: the first `prompt_len` bytes are the prompt (prefill at the policy's
prefill width); the next `gen_len` bytes are
- scored with teacher forcing through decode passes at the scheduled widths: bits per byte, and
  next-token agreement with fp16's argmax on the same inputs;
- continued freely (greedy) and compared with fp16's own continuation: Rouge-L over words and bytes.
Runs on the reference backend by default (bit-exact twin of the kernels up to summation order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from mpsim.engine.backends import make_backend
from mpsim.engine.generate import Generation, generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import FixedScheduler, Scheduler
from mpsim.engine.weights import ModelParams
from mpsim.policy import mean_decode_bits, parse_policy, pmpd_average_bits
from mpsim.quality.rouge import rouge_l, words
from mpsim.tiny.corpus import load_corpus


@dataclass(frozen=True)
class QualityReport:
    policy: str
    scheduler: str
    samples: int
    bits_per_byte: float
    agreement_with_fp16: float
    rouge_l_words: float
    rouge_l_bytes: float
    avg_bits_pmpd: float
    avg_bits_mean: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def heldout_windows(samples: int, length: int, seed: int = 0) -> list[list[int]]:
    """`samples` byte windows of `length` from the held-out stdlib files, at seeded offsets."""
    data = load_corpus("heldout", 1_000_000)
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.choice(len(data) - length, size=samples, replace=False))
    return [data[s:s + length].tolist() for s in starts]


def _bpb_and_argmax(gen: Generation, targets: Sequence[Sequence[int]]) -> tuple[float, np.ndarray]:
    """Bits per byte of the targets under the kept logits, and the argmax of every pass."""
    logits = torch.stack(gen.logits).float()  # (passes, B, V)
    logp = torch.log_softmax(logits, dim=-1)
    tgt = torch.tensor([list(t) for t in targets]).T  # (passes, B)
    nll = -logp.gather(-1, tgt[..., None]).squeeze(-1)
    return float(nll.mean()) / math.log(2), logits.argmax(-1).numpy()


@dataclass
class Fp16Baseline:
    argmax: np.ndarray
    continuations: list[list[int]]


def fp16_baseline(params: ModelParams, windows: list[list[int]], prompt_len: int, gen_len: int,
                  backend: str = "reference") -> Fp16Baseline:
    policy = parse_policy("fp16")
    decoder = Decoder(params, policy, make_backend(backend))
    return _run(decoder, FixedScheduler(policy), windows, prompt_len, gen_len)[1]


def _run(decoder: Decoder, scheduler: Scheduler, windows: list[list[int]], prompt_len: int,
         gen_len: int) -> tuple[float, Fp16Baseline, list[list[int]]]:
    prompts = [w[:prompt_len] for w in windows]
    targets = [w[prompt_len:prompt_len + gen_len] for w in windows]
    forced = generate(decoder, prompts, gen_len, scheduler, keep_logits=True, forced=targets)
    bpb, argmax = _bpb_and_argmax(forced, targets)
    free = generate(decoder, prompts, gen_len, scheduler)
    return bpb, Fp16Baseline(argmax, free.tokens), forced.decode_bits


def measure_quality(params: ModelParams, policy_text: str, scheduler: Scheduler | None,
                    windows: list[list[int]], prompt_len: int, gen_len: int, base: Fp16Baseline,
                    backend: str = "reference") -> QualityReport:
    policy = parse_policy(policy_text)
    sched = scheduler or FixedScheduler(policy)
    decoder = Decoder(params, policy, make_backend(backend))
    bpb, got, bits = _run(decoder, sched, windows, prompt_len, gen_len)
    agree = float((got.argmax == base.argmax).mean())
    r_words = np.mean([rouge_l(words(bytes(c)), words(bytes(r)))
                       for c, r in zip(got.continuations, base.continuations, strict=True)])
    r_bytes = np.mean([rouge_l(c, r) for c, r in zip(got.continuations, base.continuations, strict=True)])
    return QualityReport(policy_text, getattr(sched, "name", "fixed"), len(windows), bpb, agree,
                         float(r_words), float(r_bytes), pmpd_average_bits(bits), mean_decode_bits(bits))
