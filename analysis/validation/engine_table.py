"""The engine-benchmarks comparison as numbers and as the docs/validation.md block: published vs
predicted per run, each precision's ratio to its baseline (the engine's own bf16/fp16 run; for a
TP 4 run the same precision on one GPU; published and predicted), the errors, and whether each
issue's targets hold (values within 15%, ratios within 10%; a qualitative row's ratio in its band).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mpsim.analysis.validation.engine_rows import COUNTS, NOT_OWNED, RowSetup
from mpsim.analysis.validation.engine_run import Run

VALUE_TARGET = 0.15  # issues 23/25/26 Done-when: tokens/s (or latency) within 15%
RATIO_TARGET = 0.10  # and each precision's ratio to the engine's bf16/fp16 row within 10%


@dataclass(frozen=True)
class Outcome:
    """A run's prediction beside its baseline precision's run at the same batch (or position)."""

    run: Run
    predicted: float
    base: Run
    base_predicted: float
    position: int = 0  # the run's place among its precision's batches

    @property
    def is_baseline(self) -> bool:
        return self.run.precision == self.base.precision

    @property
    def qualitative(self) -> bool:
        return self.run.setup.band is not None

    @property
    def error(self) -> float | None:
        pub = self.run.published
        return None if pub is None else self.predicted / pub - 1

    def _ratio(self, value: float, base: float) -> float:
        """A speedup over the baseline: of tokens/s, value / base; of a latency, base / value."""
        return base / value if self.run.setup.count == "latency" else value / base

    @property
    def ratio_published(self) -> float | None:
        if self.is_baseline:
            return None
        if self.run.precision.ratios is not None:
            return self.run.precision.ratios[self.position]
        pub, base = self.run.published, self.base.published
        return None if pub is None or base is None else self._ratio(pub, base)

    @property
    def ratio_predicted(self) -> float | None:
        return None if self.is_baseline else self._ratio(self.predicted, self.base_predicted)

    @property
    def ratio_error(self) -> float | None:
        pub, pred = self.ratio_published, self.ratio_predicted
        return None if pub is None or pred is None else pred / pub - 1

    @property
    def in_band(self) -> bool | None:
        """A qualitative row's target: the predicted ratio within the row's band."""
        band, pred = self.run.setup.band, self.ratio_predicted
        return None if band is None or pred is None else band[0] <= pred <= band[1]

    @property
    def owners(self) -> list[str]:
        return [o.strip() for o in self.run.precision.owner.split(",")]


def outcomes(runs: Sequence[Run], predicted: Sequence[float]) -> list[Outcome]:
    """Pair each run with its baseline precision's run at the same batch (where the baseline ran
    it), else at the same position in the batch list (memory-budget batches differ by precision)."""
    index: dict[tuple[str, str], list[tuple[Run, float]]] = {}
    for run, value in zip(runs, predicted, strict=True):
        index.setdefault((run.setup.row, run.precision.label), []).append((run, value))
    out = []
    for run, value in zip(runs, predicted, strict=True):
        position = [r for r, _ in index[(run.setup.row, run.precision.label)]].index(run)
        bases = index[(run.setup.row, run.setup.base_of(run.precision).label)]
        same = [b for b in bases if b[0].batch == run.batch]
        base, base_value = same[0] if same else bases[position]
        out.append(Outcome(run, value, base, base_value, position))
    return out


def _value(v: float | None, latency: bool) -> str:
    if v is None:
        return "-"
    return f"{v:.3f} s" if latency else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def _pct(e: float | None, target: float | None) -> str:
    if e is None:
        return "-"
    return f"{100 * e:+.1f}%" + ("" if target is None or abs(e) <= target else " ✗")


def _ratio(r: float | None, places: int = 2) -> str:
    return "-" if r is None else f"{r:.{places}f}x"


HEADER = ("| row | issue | engine on GPU | precision (mpsim policy) | batch | published | predicted | error "
          "| ratio to | published | predicted | error |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def _ratio_error(o: Outcome) -> str:
    if o.qualitative and o.in_band is not None:
        lo, hi = o.run.setup.band or (0.0, 0.0)
        mark = "" if o.in_band else " ✗"
        return f"{_pct(o.ratio_error, None)} (target {lo:g}-{hi:g}x{mark})"
    return _pct(o.ratio_error, RATIO_TARGET)


def table_lines(outs: Sequence[Outcome]) -> list[str]:
    lines = [HEADER]
    for o in outs:
        s, lat = o.run.setup, o.run.setup.count == "latency"
        p = o.run.precision
        name = p.label + (f" on {p.tp} GPUs" if p.tp > 1 and "TP" not in p.label else "")
        versus = "-" if o.is_baseline else o.base.precision.label
        places = 3 if o.qualitative else 2  # a band's edge: 1.104 is outside 1.1
        lines.append(f"| {s.row} | {p.owner} | {s.engine} on {s.hw} | {name} ({p.policy}) "
                     f"| {o.run.batch} | {_value(o.run.published, lat)} | {_value(o.predicted, lat)} "
                     f"| {_pct(o.error, None if o.qualitative else VALUE_TARGET)} | {versus} "
                     f"| {_ratio(o.ratio_published, places)} | {_ratio(o.ratio_predicted, places)} "
                     f"| {_ratio_error(o)} |")
    return lines


def verdict(outs: Sequence[Outcome]) -> list[str]:
    """One line per owning issue: its values within 15%, its ratios within 10% (or in the band)."""
    lines = []
    for issue in sorted({i for o in outs for i in o.owners}, key=int):
        mine = [o for o in outs if issue in o.owners]
        values = [o.error for o in mine if o.error is not None and not o.qualitative]
        ratios = [abs(o.ratio_error) <= RATIO_TARGET for o in mine
                  if o.ratio_error is not None and not o.qualitative]
        bands = [bool(o.in_band) for o in mine if o.in_band is not None]
        ok_v = sum(abs(e) <= VALUE_TARGET for e in values)
        met = "met" if ok_v == len(values) and all(ratios) and all(bands) else "not met"
        mape = f"{100 * sum(abs(e) for e in values) / len(values):.1f}%" if values else "-"
        text = (f"- issue {issue}: {ok_v} of {len(values)} published values within {VALUE_TARGET:.0%} "
                f"(mean absolute error {mape}), {sum(ratios)} of {len(ratios)} ratios within "
                f"{RATIO_TARGET:.0%}")
        if bands:
            text += f", {sum(bands)} of {len(bands)} qualitative ratios in their band"
        lines.append(text + f": **{met}**")
    return lines


def block(setups: Sequence[RowSetup], outs: Sequence[Outcome], stand_ins: dict[str, list[str]]) -> str:
    """The docs/validation.md block: the table, the verdict per issue, each row's set-up, the rows
    not repeated."""
    lines = [*table_lines(outs), "", "Targets (each issue's Done when; ✗ marks a miss):", "",
             *verdict(outs), "", "How each row is set up:", ""]
    for s in setups:
        subs = "; ".join(stand_ins[s.row]) or "none"
        batch = ", ".join(map(str, s.batches)) if s.batches else "the memory-budget batch"
        lines.append(f"- **{s.row}**: {s.model}, prompt {s.prompt_len}, {s.gen_len} new tokens, batch "
                     f"{batch}; counts {COUNTS[s.count]}. Set-up: {s.note}. Kernels standing in on "
                     f"this GPU: {subs}.")
    lines += ["", "Rows of the file this table does not repeat:", ""]
    lines += [f"- {row}: {why}" for row, why in NOT_OWNED]
    return "\n".join(lines)
