"""Greedy generation: batch >= 1, prompts of different lengths, per-sequence stop on EOS.

The prefill pass over the right-padded prompts yields each sequence's first new token; every decode
pass after it feeds the last token of each sequence, at the precision the scheduler gives: one width
for the batch, or one per sequence. Sequences at different widths share the pass by running it once
per width present and keeping each sequence's logits and KV-cache slots from its own width's run
(every op is row-independent, so each sequence sees exactly what a batch at its width would).
Schedules must be monotone: a sequence's width never rises (checked every step).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from mpsim.engine.backends import LayerCache
from mpsim.engine.fp_ops import Fp8KV
from mpsim.engine.model import Decoder, PassInput, scope
from mpsim.engine.scheduler import Bits, Scheduler, StepState
from mpsim.errors import MpsimInputError
from mpsim.kernels.kv_cache import KVCache


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
             *, eos: int | Collection[int] | None = None, keep_logits: bool = False,
             forced: Sequence[Sequence[int]] | None = None) -> Generation:
    """Greedy decoding; a sequence stops after emitting `eos` (one id or several). With `forced`
    (gen_len - 1 tokens per sequence), teacher forcing: each decode pass is fed the forced token
    instead of the previous argmax (for scoring held-out text)."""
    if forced is not None and any(len(f) < gen_len - 1 for f in forced):
        raise ValueError(f"forced: expected at least gen_len - 1 = {gen_len - 1} tokens per sequence")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise MpsimInputError("prompts: expected at least one non-empty prompt")
    if gen_len < 1:
        raise MpsimInputError(f"gen_len: expected >= 1, got {gen_len}")
    dev, b = decoder.backend.device, len(prompts)
    lens = [len(p) for p in prompts]
    t = max(lens)
    ids = torch.zeros((b, t), dtype=torch.int64, device=dev)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.tensor(list(p), dtype=torch.int64)
    cache = decoder.new_cache(b, t + gen_len)
    positions = torch.arange(t, dtype=torch.int32, device=dev).repeat(b, 1)
    scheduler.start(b)
    bits = scheduler.prefill_bits()
    out = Generation([list(p) for p in prompts], [[] for _ in prompts], bits, [[] for _ in prompts])
    inp = PassInput(ids, positions, _i32([0] * b, dev), _i32(lens, dev), t, "prefill", 0, bits)
    logits = decoder.forward(inp, cache)
    kv = prompt_kv(cache[-1], t)
    current = [bits] * b
    stop = frozenset(() if eos is None else (eos,) if isinstance(eos, int) else (int(e) for e in eos))
    running = _take(decoder, logits, out, [True] * b, stop, keep_logits, "prefill", 0)
    for step in range(1, gen_len):
        if not any(running):
            break
        state = StepState(step, logits, kv, tuple(lens), tuple(running), tuple(current))
        current = _widths(scheduler, state, current, running)
        for i in range(b):
            if running[i]:
                out.decode_bits[i].append(current[i])
        pos = [n + step - 1 for n in lens]
        feed = [seq[-1] for seq in out.tokens] if forced is None else [f[step - 1] for f in forced]
        last = torch.tensor(feed, dtype=torch.int64, device=dev)[:, None]
        logits = _decode_pass(decoder, cache, last, pos, t + step, step, current, running)
        running = _take(decoder, logits, out, running, stop, keep_logits, "decode", step)
    return out


def _widths(scheduler: Scheduler, state: StepState, current: list[int], running: list[bool]) -> list[int]:
    """The scheduler's answer as one width per sequence, checked to be monotone."""
    want: Bits = scheduler.decode_bits(state)
    b = len(current)
    per_seq = [int(want)] * b if isinstance(want, int) else [int(w) for w in want]
    if len(per_seq) != b:
        raise ValueError(f"scheduler {scheduler.name!r}: {len(per_seq)} widths for a batch of {b}")
    for i, (old, new) in enumerate(zip(current, per_seq, strict=True)):
        if running[i] and new > old:
            raise ValueError(f"scheduler {scheduler.name!r}, sequence {i}, decode step {state.step}: "
                             f"width rose from {old} to {new} bits; schedules must be monotone")
    return [new if running[i] else old for i, new in enumerate(per_seq)]


def _decode_pass(decoder: Decoder, cache: list[LayerCache], last: torch.Tensor, pos: list[int],
                 max_kv: int, step: int, widths: list[int], running: list[bool]) -> torch.Tensor:
    """One decode pass; with several widths among running sequences, one run per width."""
    dev = decoder.backend.device
    p = _i32(pos, dev)
    present = sorted({w for w, r in zip(widths, running, strict=True) if r}, reverse=True)

    def run(bits: int) -> torch.Tensor:
        inp = PassInput(last, p[:, None], p, p + 1, max_kv, "decode", step, bits)
        return decoder.decode(inp, cache)

    if len(present) == 1:
        return run(present[0])
    logits: torch.Tensor | None = None
    kept = []
    for bits in present:
        rows = [i for i, w in enumerate(widths) if w == bits]
        got = run(bits)
        logits = got.clone() if logits is None else logits
        logits[rows] = got[rows]
        kept.append((rows, _slots(cache, rows, pos)))
    for rows, saved in kept:
        _restore(cache, rows, pos, saved)
    assert logits is not None
    return logits


def _cache_tensors(cache: list[LayerCache]) -> list[torch.Tensor | None]:
    return [t for layer in cache for c in (layer.k, layer.v) for t in (c.data, c.scale, c.zero)]


def _slots(cache: list[LayerCache], rows: list[int], pos: list[int]) -> list[torch.Tensor | None]:
    """Copies of the KV-cache entries the pass just wrote for `rows` (every layer, K and V)."""
    r, q = torch.tensor(rows), torch.tensor([pos[i] for i in rows])
    return [None if t is None else t[r, :, q].clone() for t in _cache_tensors(cache)]


def _restore(cache: list[LayerCache], rows: list[int], pos: list[int],
             saved: list[torch.Tensor | None]) -> None:
    r, q = torch.tensor(rows), torch.tensor([pos[i] for i in rows])
    for t, s in zip(_cache_tensors(cache), saved, strict=True):
        if t is not None and s is not None:
            t[r, :, q] = s


def prompt_kv(layer: LayerCache, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's K and V over the first t cache slots as fp16 (B, kv_heads, t, head_dim)."""
    return _dense(layer.k, t), _dense(layer.v, t)


def _dense(c: KVCache | Fp8KV, t: int) -> torch.Tensor:
    if isinstance(c, Fp8KV):
        return c.dense(t)
    if c.bits == 16:
        return c.data[:, :, :t].clone()
    from mpsim.reference.kv_quant import kv_dequant_ref

    assert c.scale is not None and c.zero is not None
    codes, scale, zero = (x[:, :, :t].cpu().numpy() for x in (c.data, c.scale, c.zero))
    x = kv_dequant_ref(np.ascontiguousarray(codes), scale, zero, c.bits, c.head_dim)
    return torch.from_numpy(x).to(c.data.device)


def _take(decoder: Decoder, logits: torch.Tensor, out: Generation, running: list[bool],
          eos: frozenset[int], keep: bool, phase: str, step: int) -> list[bool]:
    with scope(phase=phase, step=step, layer=-1, module="sample"):
        nxt = decoder.backend.argmax(logits).tolist()
    if keep:
        out.logits.append(logits.detach().cpu())
    still = []
    for i, tok in enumerate(nxt):
        if running[i]:
            out.tokens[i].append(int(tok))
        still.append(running[i] and int(tok) not in eos)
    return still
