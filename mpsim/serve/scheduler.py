"""Iteration-level continuous batching over a paged KV cache (vLLM / TurboMind style).

Every iteration the scheduler picks the work of one forward step:

- chunked prefill (default, vLLM V1 / Sarathi-Serve): a budget of `max_num_batched_tokens` tokens;
  every running sequence that has finished its prefill decodes one token, running sequences with a
  partial prefill continue it (in admission order) with what the budget leaves, then waiting
  requests are admitted first come, first served while the budget, `max_num_seqs` and the KV blocks
  allow (a new request must leave the watermark free), each taking a chunk of its prompt;
- prefill-first (`chunked_prefill=False`, vLLM's V0 default): if a waiting request can be admitted,
  the iteration prefills whole prompts only (FCFS, within the budget, seats and blocks); otherwise
  every running sequence decodes one token.

A decode that needs a new KV block when none is free preempts the most recently admitted running
sequence (possibly itself), which frees its blocks and goes back to the front of the queue; it is
recomputed later as a prefill of its prompt plus the tokens it had generated (vLLM's recompute
preemption). Blocks are allocated as tokens are written: ceil(cached tokens / block_size) per
sequence. State is per request in NumPy arrays; the common path of an iteration is vectorized.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass

import numpy as np

from mpsim.errors import MpsimInputError
from mpsim.serve.arrivals import Requests
from mpsim.serve.config import SchedulerConfig
from mpsim.serve.kv import KvCapacity


@dataclass(frozen=True)
class Step:
    """One iteration's work: decoding sequences and prefill chunks (request, tokens, cached before)."""

    decode: np.ndarray
    prefill: tuple[tuple[int, int, int], ...]
    preempted: int

    @property
    def prefill_tokens(self) -> int:
        return sum(c for _, c, _ in self.prefill)


class Scheduler:
    def __init__(self, reqs: Requests, cfg: SchedulerConfig, cap: KvCapacity, budget: int) -> None:
        n = len(reqs)
        self.cfg, self.cap, self.budget = cfg, cap, budget
        self.arrival = reqs.arrival_s
        self.prompt, self.gen = reqs.prompt_len, reqs.gen_len
        self.ctx = np.zeros(n, dtype=np.int64)        # tokens whose K/V are cached
        self.target = self.prompt.copy()              # tokens the current prefill must cache
        self.generated = np.zeros(n, dtype=np.int64)  # output tokens so far
        self.blocks = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.in_running = np.zeros(n, dtype=bool)
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.scheduled_s = np.full(n, np.nan)         # first admitted
        self.running: list[int] = []                  # in admission order (preemption takes the last)
        self.waiting: deque[int] = deque()
        self.free = cap.num_blocks
        self.arrived = self.finished = 0
        self._check_fits(reqs)

    def _check_fits(self, reqs: Requests) -> None:
        most = self.cap.blocks_for_array(reqs.prompt_len + reqs.gen_len - 1)
        room = self.cap.num_blocks - self.cap.watermark_blocks
        bad = np.flatnonzero(most > room)
        if len(bad):
            i = int(bad[0])
            raise MpsimInputError(
                f"{reqs.source}: request {i} (prompt {reqs.prompt_len[i]}, gen {reqs.gen_len[i]}) needs "
                f"{most[i]} KV blocks alone; the cache holds {self.cap.num_blocks} blocks of "
                f"{self.cap.block_size} tokens ({room} admissible above the watermark)")
        if not self.cfg.chunked_prefill:
            longest = reqs.prompt_len + reqs.gen_len - 1  # a recompute prefills prompt + output
            bad = np.flatnonzero(longest > self.budget)
            if len(bad):
                i = int(bad[0])
                raise MpsimInputError(
                    f"{reqs.source}: request {i}: prompt {reqs.prompt_len[i]} + {reqs.gen_len[i] - 1} "
                    f"generated tokens may need one prefill of {longest[i]} tokens, more than "
                    f"--max-num-batched-tokens {self.budget} without --chunked-prefill")

    # ---- events ------------------------------------------------------------------------------

    def arrive(self, rid: int) -> None:
        self.waiting.append(rid)
        self.arrived += 1

    @property
    def in_system(self) -> int:
        return self.arrived - self.finished

    @property
    def kv_blocks_used(self) -> int:
        return self.cap.num_blocks - self.free

    # ---- planning ----------------------------------------------------------------------------

    def plan(self, now: float) -> Step | None:
        """The next iteration's work, or None when there is nothing to run."""
        if not self.running and not self.waiting:
            return None
        forced = 0
        while True:
            step = self._plan_chunked(now) if self.cfg.chunked_prefill else self._plan_prefill_first(now)
            if len(step.decode) or step.prefill or not self.running:
                break
            # running sequences hold every block and none can go on: free the youngest (recompute)
            self._preempt(self.running[-1])
            forced += 1
        if not (len(step.decode) or step.prefill):
            return None
        return Step(step.decode, step.prefill, step.preempted + forced) if forced else step

    def _plan_chunked(self, now: float) -> Step:
        run = np.asarray(self.running, dtype=np.int64)
        ready = self.ctx[run] >= self.target[run]
        decode, preempted = self._decode_blocks(run[ready])
        budget = self.budget - len(decode)
        chunks: list[tuple[int, int, int]] = []
        for rid in (int(r) for r in run[~ready] if self.in_running[r]):
            take = self._chunk(rid, budget)
            if take <= 0:
                break
            chunks.append((rid, take, int(self.ctx[rid])))
            budget -= take
        if not preempted:  # as vLLM: no admissions in an iteration that had to preempt
            chunks += self._admit(now, budget, whole=False)
        return Step(decode, tuple(chunks), preempted)

    def _plan_prefill_first(self, now: float) -> Step:
        chunks = self._admit(now, self.budget, whole=True) if self.waiting else []
        if chunks:
            return Step(np.zeros(0, dtype=np.int64), tuple(chunks), 0)
        decode, preempted = self._decode_blocks(np.asarray(self.running, dtype=np.int64))
        return Step(decode, (), preempted)

    def _decode_blocks(self, dec: np.ndarray) -> tuple[np.ndarray, int]:
        """Allocate each decoding sequence's next block; preempt when the cache is full."""
        need = self.cap.blocks_for_array(self.ctx[dec] + 1) - self.blocks[dec]
        total = int(need.sum())
        if total <= self.free:
            self.blocks[dec] += need
            self.free -= total
            return dec, 0
        keep, preempted = [], 0
        for rid, nd in zip(dec.tolist(), need.tolist(), strict=True):
            if not self.in_running[rid]:
                continue  # preempted above as someone's victim
            while nd > self.free:
                victim = self.running[-1]
                self._preempt(victim)
                preempted += 1
                if victim == rid:
                    break
            if self.in_running[rid]:
                self.blocks[rid] += nd
                self.free -= nd
                keep.append(rid)
        return np.asarray(keep, dtype=np.int64), preempted

    def _chunk(self, rid: int, budget: int) -> int:
        """Prefill tokens `rid` takes now: its remainder within the budget and the free blocks."""
        want = min(int(self.target[rid] - self.ctx[rid]), budget)
        room = (int(self.blocks[rid]) + self.free) * self.cap.block_size - int(self.ctx[rid])
        take = max(0, min(want, room))
        if take > 0:
            new = self.cap.blocks_for(int(self.ctx[rid]) + take) - int(self.blocks[rid])
            self.blocks[rid] += new
            self.free -= new
        return take

    def _admit(self, now: float, budget: int, whole: bool) -> list[tuple[int, int, int]]:
        """Admit waiting requests first come, first served (a chunk each, or whole prefills)."""
        chunks = []
        while self.waiting and budget > 0 and len(self.running) < self.cfg.max_num_seqs:
            rid = self.waiting[0]
            take = int(self.target[rid])
            if whole and take > budget:
                break
            take = min(take, budget)
            need = self.cap.blocks_for(take)
            if self.free - need < self.cap.watermark_blocks:
                break
            self.waiting.popleft()
            self.running.append(rid)
            self.in_running[rid] = True
            self.blocks[rid] = need
            self.free -= need
            if np.isnan(self.scheduled_s[rid]):
                self.scheduled_s[rid] = now
            chunks.append((rid, take, 0))
            budget -= take
        return chunks

    def _preempt(self, rid: int) -> None:
        self.running.remove(rid)
        self.in_running[rid] = False
        self.free += int(self.blocks[rid])
        self.blocks[rid] = 0
        self.ctx[rid] = 0
        self.target[rid] = self.prompt[rid] + self.generated[rid]
        self.preemptions[rid] += 1
        self.waiting.appendleft(rid)

    # ---- completion --------------------------------------------------------------------------

    def complete(self, step: Step, now: float) -> int:
        """Apply an iteration that ended at `now`; returns how many requests finished."""
        dec = step.decode
        self.ctx[dec] += 1
        self.generated[dec] += 1
        done = dec[self.generated[dec] >= self.gen[dec]].tolist()
        for rid, take, _ in step.prefill:
            self.ctx[rid] += take
            if self.ctx[rid] >= self.target[rid]:
                self.generated[rid] += 1
                if self.generated[rid] == 1:
                    self.first_token_s[rid] = now
                if self.generated[rid] >= self.gen[rid]:
                    done.append(rid)
        for rid in done:
            self.finish_s[rid] = now
            self.free += int(self.blocks[rid])
            self.blocks[rid] = 0
            self.in_running[rid] = False
        if done:
            self.running = [r for r in self.running if self.in_running[r]]
            self.finished += len(done)
        return len(done)


def merged(scheds: list[Scheduler]) -> Scheduler:
    """The requests' outcomes of several schedulers that each served some of them (vLLM's virtual
    engines under pipeline parallelism, mpsim/serve/engine.py): per request, the times and
    preemptions of the one that served it, as one scheduler's arrays (a copy of the first's)."""
    if len(scheds) == 1:
        return scheds[0]
    out = copy.copy(scheds[0])
    for name in ("first_token_s", "finish_s", "scheduled_s"):
        stacked = np.stack([getattr(s, name) for s in scheds])
        served = ~np.isnan(stacked)
        setattr(out, name, np.where(served.any(axis=0), np.nansum(np.where(served, stacked, 0.0), axis=0),
                                    np.nan))
    out.preemptions = np.sum([s.preemptions for s in scheds], axis=0)
    out.finished = sum(s.finished for s in scheds)
    out.arrived = sum(s.arrived for s in scheds)
    return out
