"""Iteration times from the kernel-level models: components priced through `mpsim.sim.simulate`.

An iteration (rows.py) is cut into components, each priced once through `simulate` (a batch of new
components per call, sharing one launch memo) and summed:

- `rows` (T): the embedding and every layer's row-wise launches over T tokens (norms, RoPE, KV write,
  residual adds, activation), GEMM and attention launches replaced by stand-ins that leave the same
  bytes in L2; layer 0 once, layer 1 for the other layers (every layer after the first sees the
  same residency);
- `gemm` (weights, M): one layer's GEMMs of a precision group, each after a stand-in of its
  predecessor, times the layers;
- `decode` (sequences, longest KV, KV tokens) and `prefill` (count, chunk, cached before): one
  attention launch after its own KV write, times the layers;
- `tail` (S, with a prefill or not): [last-token gather,] final norm, lm_head and sampling of S rows;
- `comm` (T), under a parallel plan (mpsim/parallel.py): the all-reduces of T x hidden (two per layer
  and the embedding's) and the send/recv between pipeline stages, each priced once and times its
  count (the logits' all-gather is in `tail`). Every other component is one rank's shapes. A batch
  goes through the stages one after the other (no micro-batches), so an iteration's time is the
  sum over every layer, as on one device.

A uniform iteration (one decode batch of one precision, or one batch of equal prefill chunks) is
exactly a synthesized pass, and every component sees exactly the residency it has there, so its
price is `simulate`'s for that pass. In a mixed iteration the attention launches are priced as in a
pass of their own (their real predecessor is another attention launch or a larger KV write: at most
their query bytes' worth of L2 credit differs). An iteration's bucketed shape is its signature:
priced once, then looked up. docs/serving.md measures what the buckets and the mixing add.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mpsim.engines import Target
from mpsim.engines.files import kv_key
from mpsim.engines.rows import choose
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.launch_plan import Row, layer_rows, pass_rows
from mpsim.library.trtllm_attention import KV_COUNTS_NEW_TOKEN
from mpsim.models import ModelSpec
from mpsim.parallel import SINGLE, ParallelPlan, rank_spec
from mpsim.serve.config import Buckets, IterationProtocols
from mpsim.serve.precision import PrecisionPlan
from mpsim.serve.rows import (
    Shape,
    as_target,
    base_pass,
    comm_rows,
    decode_attention_row,
    frame,
    iteration_rows,
    prefill_attention_row,
    stand_in,
    tail_rows,
)
from mpsim.serve.scheduler import Scheduler, Step
from mpsim.sim import simulate
from mpsim.sim.best_config import autotuned_row
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.protocols import get_protocol
from mpsim.sim.registry import PERF_MODELS


@dataclass
class PricingStats:
    iterations: int = 0
    signature_hits: int = 0
    components: int = 0
    simulate_calls: int = 0
    simulated_launches: int = 0
    simulate_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Part:
    rows: list[Row] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)  # multiplier of each row's time (0: stand-in)

    def add(self, row: Row, weight: float) -> None:
        self.rows.append(row)
        self.weights.append(weight)

    @property
    def launches(self) -> int:
        """GPU kernels the part launches (a row may stand for more than one: a KV append before
        attention, a zero fill before atomic adds; mpsim.sim.gpu.library.launch_kernels)."""
        return round(sum(w * launch_kernels(r) for r, w in zip(self.rows, self.weights, strict=True)))


Key = tuple[Any, ...]
Axis = tuple[float, float, float]  # (segment low end, high end, the value in it)


def corners(head: Key, axes: list[Axis]) -> list[tuple[Key, float]]:
    """(component key, weight) of multi-linear interpolation over the segments of each axis."""
    out: list[tuple[Key, float]] = [(head, 1.0)]
    for lo, hi, x in axes:
        f = (x - lo) / (hi - lo) if hi > lo else 0.0
        ends = [(e, g) for e, g in ((lo, 1.0 - f), (hi, f)) if g > 0] or [(lo, 1.0)]
        out = [((*k, int(e)), w * g) for k, w in out for e, g in ends]
    return out


def decode_buckets(buckets: Buckets, target: Target | None, kv_bits: int,
                   kv_format: str | None) -> Buckets:
    """The buckets with their KV tiles where the engine's decode kernel steps (Buckets.kv_phase)."""
    if target is None:
        return buckets
    kernel = choose(target.engine, "decode_attention", kv_key(kv_bits, kv_format), 1,
                    target.arch).kernel
    return replace(buckets, kv_phase=int(kernel in KV_COUNTS_NEW_TOKEN))


class IterationPricer:
    """Prices iterations of one (model, policy, hardware, performance model); reusable across runs."""

    def __init__(self, spec: ModelSpec, kv_bits: int, hw: HardwareSpec, perf_model: str,
                 buckets: Buckets, protocol: IterationProtocols, kv_block: int,
                 whole_iterations: bool = False, target: Target | None = None,
                 plan: ParallelPlan = SINGLE, kv_format: str | None = None) -> None:
        # `spec`: one rank's shapes (the whole model on one device); `full`: the model
        self.full, self.plan = spec, plan
        self.spec, self.kv_bits, self.hw, self.perf_model = rank_spec(spec, plan.tp), kv_bits, hw, perf_model
        self.kv_format = kv_format  # the cache's format (fp8-e4m3 for +kv8f); None: int by kv_bits
        # Components are priced as kernel bodies (protocol `kernel`); an iteration is one measured
        # call and pays its protocol's cost once, for all its launches. As in `simulate`, no
        # protocol cost on a bound (the roofline) or on an NPU (its dispatch is simulated).
        self.protocols = protocol
        self.launch_costs = PERF_MODELS[perf_model].launch_costs and isinstance(hw, GpuSpec)
        self.buckets, self.kv_block = decode_buckets(buckets, target, kv_bits, kv_format), kv_block
        self.whole = whole_iterations  # price each (rounded) iteration as one launch list
        self.target = target  # an engine's kernels (mpsim/engines); None: mpsim's own
        self.layers = spec.num_layers
        self.two = replace(self.spec, num_layers=min(2, spec.num_layers))
        self.memo = LaunchMemo(None)
        self.autotuned: dict[tuple[Any, ...], Any] = {}  # a library's autotuned configs by shape
        self.parts: dict[tuple[Any, ...], tuple[float, int]] = {}
        self.signatures: dict[Shape, tuple[float, int]] = {}
        self.stats = PricingStats()

    # ---- shapes ------------------------------------------------------------------------------

    def shape(self, step: Step, sched: Scheduler, plan: PrecisionPlan) -> Shape:
        """The iteration's exact shape; `plan` knows each request's precision schedule (the run's;
        its weight choices are the same as any plan of the policy)."""
        dec = step.decode
        decode = None
        groups = plan.decode_group_of(dec, sched.generated[dec]) if len(dec) else dec
        if len(dec):
            kv = sched.ctx[dec] + 1
            decode = (len(dec), int(kv.max()), int(kv.sum()))
        chunks = Counter((take, before) for _, take, before in step.prefill)
        prefill = tuple(sorted((count, q, before) for (q, before), count in chunks.items()))
        tokens = len(dec) + step.prefill_tokens
        token_groups = tuple((plan.choices[g], m) for g, m in plan.token_groups(groups, step.prefill_tokens))
        return Shape(token_groups, tokens, len(dec) + len(step.prefill), bool(step.prefill), decode, prefill)

    # ---- pricing -----------------------------------------------------------------------------

    def price(self, step: Step, sched: Scheduler, plan: PrecisionPlan) -> tuple[float, int]:
        """(seconds, launches) of the iteration `step` plans."""
        return self.price_shape(self.shape(step, sched, plan))

    def price_shape(self, s: Shape) -> tuple[float, int]:
        """Each component's price interpolated (multi-linearly) between the corners of the bucket
        segments its shape lies in; every corner is priced once, on first need."""
        self.stats.iterations += 1
        if self.whole:
            return self._whole_between(s)
        found = self.signatures.get(s)
        if found is not None:
            self.stats.signature_hits += 1
            return found
        b = self.buckets

        def seg(x: int, floor_step: int = 16) -> Axis:
            return (*b.segment(x, floor_step), x)

        terms = [corners(("rows",), [seg(s.tokens)]), corners(("tail", s.has_prefill), [seg(s.seqs)])]
        terms += [corners(("gemm", w), [seg(m, b.gemm_tile)]) for w, m in s.groups]
        terms += [corners(("prefill", c), [seg(q), (*b.kv_segment(before), before)])
                  for c, q, before in s.prefill]
        if s.decode is not None:
            terms.append(self._decode_corners(*s.decode))
        if not self.plan.single:
            terms.append(corners(("comm",), [seg(s.tokens)]))
        keys = [k for term in terms for k, _ in term]
        self._price_parts([k for k in dict.fromkeys(keys) if k not in self.parts])
        seconds = sum(w * self.parts[k][0] for term in terms for k, w in term)
        launches = sum(self.parts[term[0][0]][1] for term in terms)
        seconds += self.call_cost_s(s.has_prefill, launches)
        self.signatures[s] = (seconds, launches)
        return seconds, launches

    def call_cost_s(self, has_prefill: bool, launches: int) -> float:
        """What an iteration of `launches` launches pays beyond its kernel bodies: its protocol's
        cost for one call (mpsim/sim/protocols.py) and the host overhead."""
        cost = 0.0
        if self.launch_costs:
            cost = float(get_protocol(self.protocols.name(has_prefill)).cost_s(launches))
        return cost + self.protocols.host_overhead_s

    def _decode_corners(self, n: int, kv_max: int, kv_tokens: int) -> list[tuple[Key, float]]:
        """Decode attention: interpolated in the batch and in the mean KV per sequence (segments of
        whole KV tiles, which the simulator rounds up to the same tile: flat there), at the longest
        KV rounded up to whole tiles (it only sets the grid). Keys carry KV tokens = n x mean."""
        b = self.buckets
        if not b.enabled:
            return [(("decode", n, kv_max, kv_tokens), 1.0)]
        top = b.kv(kv_max)
        mean = kv_tokens / n
        raw = corners(("decode",), [(*b.segment(n), n), (top, top, top), (*b.kv_segment(mean), mean)])
        return [((k[0], k[1], k[2], k[1] * k[3]), w) for k, w in raw]

    def reference(self, s: Shape) -> float:
        """The exact iteration: every launch of iteration_rows(s) through one `simulate` call."""
        return self._whole(s)[0]

    def _whole(self, s: Shape) -> tuple[float, int]:
        launches = as_target(iteration_rows(self.full, s, self.kv_bits, self.kv_block, self.plan,
                                            self.kv_format), self.target)
        rows = frame([self._tuned(r) for _, r in launches], launched=True)
        start = time.perf_counter()
        result = simulate(rows, self.hw, self.perf_model, memo=self.memo, protocol="kernel")
        self.stats.simulate_s += time.perf_counter() - start
        self.stats.simulate_calls += 1
        seconds = float(result.launches["time_s"].sum())
        kernels = sum(launch_kernels(r) for r in rows.to_dict("records"))
        return seconds + self.call_cost_s(s.has_prefill, kernels), kernels

    def _whole_between(self, s: Shape) -> tuple[float, int]:
        """Whole-iteration pricing: the iteration with every count at its segment's start and at its
        end (KV rounded up to whole tiles in both), interpolated linearly in the total token count
        (interpolating every axis would price 2^k iterations); a shape at its segment ends is priced
        once, exactly. Each rounded shape is a signature."""
        hi, lo = self.rounded(s), self.rounded(s, down=True)
        t = 1.0 if hi.tokens == lo.tokens else (s.tokens - lo.tokens) / (hi.tokens - lo.tokens)
        ends = [(hi, t)] + ([(lo, 1.0 - t)] if t < 1.0 else [])
        seconds = 0.0
        for shape, weight in ends:
            found = self.signatures.get(shape)
            if found is None:
                found = self.signatures[shape] = self._whole(shape)
            else:
                self.stats.signature_hits += 1
            seconds += weight * found[0]
        return seconds, self.signatures[hi][1]

    def rounded(self, s: Shape, down: bool = False) -> Shape:
        """The shape with every count rounded up to its segment's end (`down`: to its start) and KV
        up to whole tiles (the signatures of `whole_iterations` pricing)."""
        b = self.buckets

        def up(x: int) -> int:  # at most 1/2^token_bits away (exact below 2^(token_bits + 1))
            return b.segment(x, floor_step=1)[0] if down else b.tokens(x, floor_step=1)

        groups = tuple((w, up(m)) for w, m in s.groups)
        prefill = tuple((c, up(q), b.kv(before) if before else 0) for c, q, before in s.prefill)
        decode = None
        if s.decode is not None:
            n, kv_max, kv_tokens = s.decode
            decode = (up(n), b.kv(kv_max), up(n) * b.kv(-(-kv_tokens // n)))
        tokens = sum(m for _, m in groups)
        return Shape(groups, tokens, up(s.seqs), s.has_prefill, decode, prefill)

    def _price_parts(self, keys: list[tuple[Any, ...]]) -> None:
        if not keys:
            return
        parts = [self._launched(self._part(k)) for k in keys]
        rows = [r for p in parts for r in p.rows]
        start = time.perf_counter()
        result = simulate(frame(rows, launched=True), self.hw, self.perf_model, memo=self.memo,
                          protocol="kernel")
        self.stats.simulate_s += time.perf_counter() - start
        self.stats.simulate_calls += 1
        self.stats.simulated_launches += int(result.stats["simulated"])
        self.stats.components += len(keys)
        times = result.launches["time_s"].to_numpy()
        at = 0
        for key, part in zip(keys, parts, strict=True):
            span = times[at:at + len(part.rows)]
            self.parts[key] = (float(np.dot(span, part.weights)), part.launches)
            at += len(part.rows)

    def _launched(self, part: Part) -> Part:
        """The part as the engine launches it (rows.as_target): a fused op's row gone, an
        activation quantization before a W8A8 / A4 GEMM, at the weight of the row it comes from. A
        residency lead (weight 0) the engine fuses away (the KV write before attention, fused into
        TRT-LLM's attention op) becomes a stand-in writing its bytes, so the part does not take its
        L2 state from whichever part the batch priced before it. mpsim's own kernels (target None):
        an fp8 / fp4 GEMM's shape as its launches (mpsim_fp.as_own)."""
        launches: dict[int, list[Row]] = {}
        for i, row in as_target(part.rows, self.target):
            launches.setdefault(i, []).append(row)
        out = Part()
        for i, row in enumerate(part.rows):
            if part.weights[i] == 0.0 and i not in launches:
                out.add(stand_in(row), 0.0)
            for b in launches.get(i, []):
                out.add(self._tuned(b), part.weights[i])
        return out

    def _tuned(self, row: Row) -> Row:
        """A launch of a library that autotunes at run time (GemLite) at the candidate the model
        prices fastest (what its autotuner picks); every other launch as it is."""
        return autotuned_row(row, self.hw, memo=self.autotuned)

    def _part(self, key: tuple[Any, ...]) -> Part:
        kind, *args = key
        rest = self.layers - 1
        part = Part()
        if kind == "rows":
            rows = pass_rows(self.two, base_pass(args[0], self.kv_bits, self.kv_block,
                                                 kv_format=self.kv_format))
            per_layer = len(list(layer_rows(self.two, base_pass(1, self.kv_bits, self.kv_block,
                                                                 kv_format=self.kv_format), 0)))
            for i, row in enumerate(rows[:1 + per_layer * self.two.num_layers]):
                weight = 1.0 if i <= per_layer else float(rest)
                if row["op"] in ("gemm", "attention"):
                    part.add(stand_in(row), 0.0)
                else:
                    part.add(row, weight)
        elif kind == "gemm":
            p = base_pass(args[1], self.kv_bits, self.kv_block, weights=args[0],  # (weights, M)
                          kv_format=self.kv_format)
            layer = list(layer_rows(self.spec, p, 0))
            for pred, row in itertools.pairwise(layer):
                if row["op"] == "gemm":
                    part.add(stand_in(pred), 0.0)
                    part.add(row, float(self.layers))
        elif kind == "tail":  # (has a prefill, S)
            last = list(layer_rows(self.spec, base_pass(args[1], self.kv_bits, self.kv_block,
                                                        kv_format=self.kv_format), 0))[-1]
            part.add(stand_in(last), 0.0)
            for row in tail_rows(self.full, args[1], args[0], self.kv_bits, self.kv_block, self.plan,
                                 self.kv_format):
                part.add(row, 1.0)
        elif kind == "comm":  # (T): each collective of a pass once, times its count
            plan, tokens = self.plan, args[0]
            for row in comm_rows(self.full, plan, tokens, "o_allreduce", 0):
                part.add(row, float(2 * self.layers + 1))  # after O and down, and the embedding
            for row in comm_rows(self.full, plan, tokens, "stage_send", 0):
                part.add(row, float(plan.pp - 1))
        else:
            a, b, c = (int(x) for x in args)
            build = decode_attention_row if kind == "decode" else prefill_attention_row
            write, attn = build(self.spec, a, b, c, self.kv_bits, self.kv_block, 0, self.kv_format)
            part.add(write, 0.0)
            part.add(attn, float(self.layers))
        return part
