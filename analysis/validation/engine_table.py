"""The engine-benchmarks comparison as numbers and as the docs/validation.md block: published vs
predicted per run, each precision's ratio to the engine's own bf16/fp16 row (published and
predicted), the errors, and whether issue 23's targets hold (values within 15%, ratios within 10%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mpsim.analysis.validation.engine_rows import COUNTS, NOT_OWNED, RowSetup
from mpsim.analysis.validation.engine_run import Run

VALUE_TARGET = 0.15  # issue 23 Done-when: tokens/s (or latency) within 15%
RATIO_TARGET = 0.10  # and each precision's ratio to the engine's bf16/fp16 row within 10%


@dataclass(frozen=True)
class Outcome:
    """A run's prediction beside the baseline precision's run at the same batch position."""

    run: Run
    predicted: float
    base: Run
    base_predicted: float

    @property
    def is_baseline(self) -> bool:
        return self.run.precision == self.run.setup.baseline

    @property
    def error(self) -> float | None:
        pub = self.run.published
        return None if pub is None else self.predicted / pub - 1

    def _ratio(self, value: float, base: float) -> float:
        """A speedup over the baseline: of tokens/s, value / base; of a latency, base / value."""
        return base / value if self.run.setup.count == "latency" else value / base

    @property
    def ratio_published(self) -> float | None:
        pub, base = self.run.published, self.base.published
        return None if self.is_baseline or pub is None or base is None else self._ratio(pub, base)

    @property
    def ratio_predicted(self) -> float | None:
        return None if self.is_baseline else self._ratio(self.predicted, self.base_predicted)

    @property
    def ratio_error(self) -> float | None:
        pub, pred = self.ratio_published, self.ratio_predicted
        return None if pub is None or pred is None else pred / pub - 1


def outcomes(runs: Sequence[Run], predicted: Sequence[float]) -> list[Outcome]:
    """Pair each run with its row's baseline run at the same position in the batch list."""
    index: dict[tuple[str, str], list[tuple[Run, float]]] = {}
    for run, value in zip(runs, predicted, strict=True):
        index.setdefault((run.setup.row, run.precision.label), []).append((run, value))
    out = []
    for run, value in zip(runs, predicted, strict=True):
        position = [r for r, _ in index[(run.setup.row, run.precision.label)]].index(run)
        base, base_value = index[(run.setup.row, run.setup.baseline.label)][position]
        out.append(Outcome(run, value, base, base_value))
    return out


def _value(v: float | None, latency: bool) -> str:
    if v is None:
        return "-"
    return f"{v:.3f} s" if latency else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def _pct(e: float | None, target: float) -> str:
    return "-" if e is None else f"{100 * e:+.1f}%" + ("" if abs(e) <= target else " ✗")


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


HEADER = ("| row | engine on GPU | precision (mpsim policy) | batch | published | predicted | error "
          "| ratio to bf16/fp16: published | predicted | error |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def table_lines(outs: Sequence[Outcome]) -> list[str]:
    lines = [HEADER]
    for o in outs:
        s, lat = o.run.setup, o.run.setup.count == "latency"
        lines.append(f"| {s.row} | {s.engine} on {s.hw} | {o.run.precision.label} ({o.run.precision.policy}) "
                     f"| {o.run.batch} | {_value(o.run.published, lat)} | {_value(o.predicted, lat)} "
                     f"| {_pct(o.error, VALUE_TARGET)} | {_ratio(o.ratio_published)} "
                     f"| {_ratio(o.ratio_predicted)} | {_pct(o.ratio_error, RATIO_TARGET)} |")
    return lines


def verdict(outs: Sequence[Outcome]) -> str:
    values = [o.error for o in outs if o.error is not None]
    ratios = [o.ratio_error for o in outs if o.ratio_error is not None]
    ok_v = sum(abs(e) <= VALUE_TARGET for e in values)
    ok_r = sum(abs(e) <= RATIO_TARGET for e in ratios)
    met = "met" if ok_v == len(values) and ok_r == len(ratios) else "not met"
    mape = 100 * sum(abs(e) for e in values) / len(values) if values else float("nan")
    return (f"Targets (issue 23, Done when): {ok_v} of {len(values)} published values within "
            f"{VALUE_TARGET:.0%} (mean absolute error {mape:.1f}%), {ok_r} of {len(ratios)} ratios to "
            f"the engine's bf16/fp16 row within {RATIO_TARGET:.0%}: **{met}** (✗ marks a miss).")


def block(setups: Sequence[RowSetup], outs: Sequence[Outcome], stand_ins: dict[str, list[str]]) -> str:
    """The docs/validation.md block: the table, the verdict, each row's set-up, the rows not owned."""
    lines = [*table_lines(outs), "", verdict(outs), "", "How each row is set up:", ""]
    for s in setups:
        subs = "; ".join(stand_ins[s.row]) or "none"
        batch = ", ".join(map(str, s.batches)) if s.batches else "the memory-budget batch"
        lines.append(f"- **{s.row}**: {s.model}, prompt {s.prompt_len}, {s.gen_len} new tokens, batch "
                     f"{batch}; counts {COUNTS[s.count]}. Set-up: {s.note}. Kernels standing in on "
                     f"this GPU: {subs}.")
    lines += ["", "Rows of the file this table does not own:", ""]
    lines += [f"- {row}: {why}" for row, why in NOT_OWNED]
    return "\n".join(lines)
