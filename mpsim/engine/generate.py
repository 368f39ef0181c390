"""Greedy generation: batch >= 1, prompts of different lengths, per-sequence stop on EOS.

The prefill pass over the right-padded prompts yields each sequence's first new token; every decode
pass after it feeds the last token of each sequence, at the precision the scheduler gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from mpsim.engine.model import Decoder, PassInput, scope
from mpsim.engine.scheduler import Scheduler, StepState


@dataclass
class Generation:
    prompts: list[list[int]]
    tokens: list[list[int]]            # new tokens per sequence (up to and including EOS)
    prefill_bits: int
    decode_bits: list[list[int]]       # per sequence: bits of decode steps 1.. while it was running
    logits: list[torch.Tensor] = field(default_factory=list)  # (B, V) per pass, when kept


def _i32(values: Sequence[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32, device=device)


def generate(decoder: Decoder, prompts: Sequence[Sequence[int]], gen_len: int, scheduler: Scheduler,
             *, eos: int | None = None, keep_logits: bool = False,
             forced: Sequence[Sequence[int]] | None = None) -> Generation:
    """Greedy decoding; with `forced` (gen_len - 1 tokens per sequence), teacher forcing: each decode
    pass is fed the forced token instead of the previous argmax (for scoring held-out text)."""
    if forced is not None and any(len(f) < gen_len - 1 for f in forced):
        raise ValueError(f"forced: expected at least gen_len - 1 = {gen_len - 1} tokens per sequence")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("prompts: expected at least one non-empty prompt")
    if gen_len < 1:
        raise ValueError(f"gen_len: expected >= 1, got {gen_len}")
    dev, b = decoder.backend.device, len(prompts)
    lens = [len(p) for p in prompts]
    t = max(lens)
    ids = torch.zeros((b, t), dtype=torch.int64, device=dev)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.tensor(list(p), dtype=torch.int64)
    cache = decoder.new_cache(b, t + gen_len)
    positions = torch.arange(t, dtype=torch.int32, device=dev).repeat(b, 1)
    bits = scheduler.prefill_bits()
    out = Generation([list(p) for p in prompts], [[] for _ in prompts], bits, [[] for _ in prompts])
    inp = PassInput(ids, positions, _i32([0] * b, dev), _i32(lens, dev), t, "prefill", 0, bits)
    logits = decoder.forward(inp, cache)
    running = _take(decoder, logits, out, [True] * b, eos, keep_logits, "prefill", 0)
    for step in range(1, gen_len):
        if not any(running):
            break
        bits = scheduler.decode_bits(StepState(step, last_logits=logits))
        for i in range(b):
            if running[i]:
                out.decode_bits[i].append(bits)
        pos = [n + step - 1 for n in lens]
        feed = [seq[-1] for seq in out.tokens] if forced is None else [f[step - 1] for f in forced]
        last = torch.tensor(feed, dtype=torch.int64, device=dev)[:, None]
        inp = PassInput(last, _i32(pos, dev)[:, None], _i32(pos, dev), _i32([p + 1 for p in pos], dev),
                        t + step, "decode", step, bits)
        logits = decoder.forward(inp, cache)
        running = _take(decoder, logits, out, running, eos, keep_logits, "decode", step)
    return out


def _take(decoder: Decoder, logits: torch.Tensor, out: Generation, running: list[bool],
          eos: int | None, keep: bool, phase: str, step: int) -> list[bool]:
    with scope(phase=phase, step=step, layer=-1, module="sample"):
        nxt = decoder.backend.argmax(logits).tolist()
    if keep:
        out.logits.append(logits.detach().cpu())
    still = []
    for i, tok in enumerate(nxt):
        if running[i]:
            out.tokens[i].append(int(tok))
        still.append(running[i] and (eos is None or int(tok) != eos))
    return still
