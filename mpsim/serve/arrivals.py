"""The requests of a serving run: when they arrive, how long their prompts and outputs are.

Arrivals: `poisson` (exponential gaps at the rate), `gamma:CV` (gamma gaps with the rate's mean and
coefficient of variation CV: shape 1/CV^2, scale 1/(rate x shape), vLLM's `--burstiness` b = 1/CV^2),
or a CSV of `arrival_s, prompt_len, gen_len[, switch_step]` rows. Lengths: `N` (fixed),
`uniform:LO:HI` (integers, both ends included), `lognormal:MEDIAN:SIGMA[:MAX]` (exp of a normal
with mean ln MEDIAN and deviation SIGMA, rounded, at least 1, at most MAX). Drawn lengths longer
than the model's context are cut to fit it (and counted); given ones (a fixed length, the CSV) are
checked and refused. The first request arrives at 0 s. One seed decides every draw.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mpsim import limits
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.serve.context import check_context, context_length, count_beyond

CSV_COLUMNS = ("arrival_s", "prompt_len", "gen_len")
CSV_OPTIONAL = ("switch_step",)
NO_SWITCH = -1  # the policy's own switch point


@dataclass(frozen=True)
class Requests:
    arrival_s: np.ndarray    # float64, non-decreasing
    prompt_len: np.ndarray   # int64 >= 1
    gen_len: np.ndarray      # int64 >= 1
    switch_step: np.ndarray  # int64, NO_SWITCH = the policy's
    source: str
    clipped: int = 0         # drawn lengths cut to fit the context
    beyond: int = 0          # requests past the context, run because --allow-beyond-context

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class LengthDist:
    kind: str
    params: tuple[float, ...]
    spelling: str

    @property
    def fixed(self) -> int | None:
        return int(self.params[0]) if self.kind == "fixed" else None

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.params[0]), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.params[0]), int(self.params[1]) + 1, size=n, dtype=np.int64)
        median, sigma = self.params[:2]
        cap = self.params[2] if len(self.params) > 2 else math.inf
        values = np.rint(np.exp(rng.normal(math.log(median), sigma, size=n)))
        return np.clip(values, 1, cap).astype(np.int64)


def parse_lengths(text: str | int, what: str) -> LengthDist:
    """`N`, `uniform:LO:HI` or `lognormal:MEDIAN:SIGMA[:MAX]`; a bad one names the flag and grammar."""
    spelling = str(text).strip()
    head, *rest = spelling.split(":")
    grammar = "N, uniform:LO:HI or lognormal:MEDIAN:SIGMA[:MAX]"
    try:
        if not rest:
            value = int(head)
            if value < 1:
                raise MpsimInputError(f"{what} {spelling!r}: a length must be >= 1")
            limits.SHAPE_DIM.check(value, what)
            return LengthDist("fixed", (value,), spelling)
        numbers = tuple(float(x) for x in rest)
    except ValueError:
        raise MpsimInputError(f"{what} {spelling!r}: expected {grammar}") from None
    if not all(math.isfinite(x) for x in numbers):
        raise MpsimInputError(f"{what} {spelling!r}: expected finite numbers ({grammar})")
    for x in numbers:
        limits.SHAPE_DIM.check(x, what)
    if head == "uniform" and len(numbers) == 2 and 1 <= numbers[0] <= numbers[1] \
            and all(x == int(x) for x in numbers):
        return LengthDist("uniform", numbers, spelling)
    if head == "lognormal" and len(numbers) in (2, 3) and numbers[0] >= 1 and numbers[1] >= 0 \
            and (len(numbers) == 2 or numbers[2] >= 1):
        return LengthDist("lognormal", numbers, spelling)
    raise MpsimInputError(f"{what} {spelling!r}: expected {grammar} (LO <= HI, MEDIAN >= 1, "
                          "SIGMA >= 0, MAX >= 1)")


def arrival_kind(text: str) -> tuple[str, float]:
    """('poisson', 1), ('gamma', CV) or ('csv', 0) for a file path."""
    if text == "poisson":
        return "poisson", 1.0
    if text.startswith("gamma:"):
        try:
            cv = float(text.split(":", 1)[1])
        except ValueError:
            cv = -1.0
        if not cv > 0:
            raise MpsimInputError(f"--arrivals {text!r}: gamma:CV needs a coefficient of variation > 0")
        return "gamma", cv
    if text.endswith(".csv"):
        return "csv", 0.0
    raise MpsimInputError(f"--arrivals {text!r}: expected poisson, gamma:CV or a FILE.csv")


def generate(spec: ModelSpec, *, rate: float, arrivals: str = "poisson", requests: int | None = None,
             duration_s: float | None = None, prompt: LengthDist, gen: LengthDist, seed: int = 0,
             switch_steps: tuple[np.ndarray, np.ndarray] | None = None,
             allow_beyond: bool = False) -> Requests:
    """Synthetic requests: `requests` of them, or as many as arrive within `duration_s`."""
    kind, cv = arrival_kind(arrivals)
    if kind == "csv":
        raise MpsimInputError("generate: a CSV of arrivals is read with read_arrivals_csv")
    if not 0 < rate < math.inf:
        raise MpsimInputError(f"--rate must be > 0 requests/s, got {rate}")
    if (requests is None) == (duration_s is None):
        raise MpsimInputError("give either --requests N or --duration S")
    if prompt.fixed is not None or gen.fixed is not None:  # given lengths must fit, drawn ones are cut
        check_context(spec, prompt.fixed or 1, gen.fixed or 1, allow_beyond, "--prompt-len/--gen-len")
    arrival_rng, length_rng, switch_rng = (np.random.default_rng(s) for s in
                                           np.random.SeedSequence(seed).spawn(3))
    times = _arrival_times(arrival_rng, kind, cv, rate, requests, duration_s)
    n = len(times)
    p, g = prompt.draw(length_rng, n), gen.draw(length_rng, n)
    p, g, clipped = _fit_context(spec, p, g, gen.fixed is not None, allow_beyond)
    switch = np.full(n, NO_SWITCH, dtype=np.int64)
    if switch_steps is not None:
        steps, weights = switch_steps
        switch = switch_rng.choice(steps, size=n, p=weights / weights.sum()).astype(np.int64)
    src = f"{arrivals} at {rate:g}/s, prompt {prompt.spelling}, gen {gen.spelling}, seed {seed}"
    return Requests(times, p, g, switch, src, clipped, count_beyond(spec, p, g))


def _arrival_times(rng: np.random.Generator, kind: str, cv: float, rate: float, n: int | None,
                   duration_s: float | None) -> np.ndarray:
    def gaps(count: int) -> np.ndarray:
        if kind == "poisson":
            return rng.exponential(1.0 / rate, size=count)
        shape = 1.0 / (cv * cv)
        return rng.gamma(shape, 1.0 / (rate * shape), size=count)

    if n is not None:
        if n < 1:
            raise MpsimInputError(f"--requests must be >= 1, got {n}")
        limits.REQUESTS.check(n, "--requests")
        return np.concatenate([[0.0], np.cumsum(gaps(n - 1))])
    assert duration_s is not None
    if not 0 < duration_s < math.inf:
        raise MpsimInputError(f"--duration must be > 0 s, got {duration_s}")
    limits.REQUESTS.check(math.ceil(rate * duration_s), f"--rate {rate:g} x --duration {duration_s:g} s")
    times = np.array([0.0])
    while times[-1] <= duration_s:  # draw in chunks until past the end
        times = np.concatenate([times, times[-1] + np.cumsum(gaps(int(rate * duration_s) + 16))])
    return times[times <= duration_s]


def _fit_context(spec: ModelSpec, p: np.ndarray, g: np.ndarray, gen_fixed: bool,
                 allow_beyond: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Cut drawn lengths to fit the context: the prompt first when the output length is given."""
    limit = context_length(spec)
    if allow_beyond or limit is None:
        return p, g, 0
    over = p + g > limit
    p = np.minimum(p, limit - (g if gen_fixed else 1))
    g = np.minimum(g, limit - p)
    return p, g, int(over.sum())


def read_arrivals_csv(path: str | Path, spec: ModelSpec, allow_beyond: bool = False,
                      limit: int | None = None) -> Requests:
    """A user's arrivals, checked row by row; the first bad one is an error naming file, row, value."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise MpsimInputError(f"{path}: cannot read the arrivals file ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise MpsimInputError(f"{path}: not a CSV text file ({exc})") from None
    if not rows:
        raise MpsimInputError(f"{path}: empty; expected a header {', '.join(CSV_COLUMNS)}")
    header = [h.strip() for h in rows[0]]
    for col in CSV_COLUMNS:
        if col not in header:
            raise MpsimInputError(f"{path}: row 0 (header): missing column {col!r}; the header is "
                                  f"{header}, expected {', '.join(CSV_COLUMNS)}[, switch_step]")
    body = rows[1:limit + 1 if limit else None]
    if not body:
        raise MpsimInputError(f"{path}: no request rows after the header")
    limits.REQUESTS.check(len(body), f"{path}: rows")
    cols = {c: header.index(c) for c in (*CSV_COLUMNS, *CSV_OPTIONAL) if c in header}
    parsed = [_csv_row(path, i, r, cols, spec, allow_beyond) for i, r in enumerate(body, start=1)]
    arrival = np.array([r[0] for r in parsed], dtype=np.float64)
    back = np.flatnonzero(np.diff(arrival) < 0)
    if len(back):
        i = int(back[0]) + 2
        raise MpsimInputError(f"{path}: row {i}: arrival_s {body[i - 1][cols['arrival_s']]!r} is earlier "
                              f"than row {i - 1}'s {body[i - 2][cols['arrival_s']]!r}; timestamps must "
                              "not decrease")
    ints = np.array([r[1:] for r in parsed], dtype=np.int64)
    return Requests(arrival - arrival[0], ints[:, 0], ints[:, 1], ints[:, 2], str(path),
                    beyond=count_beyond(spec, ints[:, 0], ints[:, 1]))


def _csv_row(path: Path, i: int, row: list[str], cols: dict[str, int], spec: ModelSpec,
             allow_beyond: bool) -> tuple[float, int, int, int]:
    def cell(col: str) -> str:
        j = cols[col]
        if j >= len(row) or not row[j].strip():
            raise MpsimInputError(f"{path}: row {i}: {col} is empty")
        return row[j].strip()

    text = cell("arrival_s")
    try:
        arrival = float(text)
    except ValueError:
        arrival = math.nan
    if not math.isfinite(arrival) or arrival < 0:
        raise MpsimInputError(f"{path}: row {i}: arrival_s {text!r}: expected seconds >= 0")
    values = {}
    for col in ("prompt_len", "gen_len", "switch_step"):
        if col not in cols:
            values[col] = NO_SWITCH
            continue
        text = cell(col)
        try:
            values[col] = int(text)
        except ValueError:
            raise MpsimInputError(f"{path}: row {i}: {col} {text!r}: expected an integer") from None
        least = 0 if col == "switch_step" else 1
        if values[col] < least:
            raise MpsimInputError(f"{path}: row {i}: {col} {text!r}: must be >= {least}")
        limits.SHAPE_DIM.check(values[col], f"{path}: row {i}: {col}")
    check_context(spec, values["prompt_len"], values["gen_len"], allow_beyond, f"{path}: row {i}")
    return arrival, values["prompt_len"], values["gen_len"], values["switch_step"]


def parse_switch_dist(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Switch points to draw from: `S:COUNT,S:COUNT,...`, or `FILE.csv:SCHEDULER`, the histogram
    column (`S=0:12 S=11:6 ...`) of the scheduler's row in `mpsim evaluate`'s switch_points.csv."""
    if ".csv:" in text:
        file, scheduler = text.rsplit(":", 1)
        pairs = _histogram_from_csv(Path(file), scheduler)
    else:
        pairs = [p.strip() for p in text.split(",") if p.strip()]
    try:
        steps, counts = zip(*[(int(a.removeprefix("S=")), float(b)) for a, b in
                              (p.split(":") for p in pairs)], strict=True)
    except ValueError:
        raise MpsimInputError(f"--switch-dist {text!r}: expected S:COUNT,S:COUNT,... or "
                              "FILE.csv:SCHEDULER (an `mpsim evaluate` switch_points.csv)") from None
    weights = np.array(counts, dtype=np.float64)
    if min(steps) < 0 or (weights < 0).any() or weights.sum() <= 0:
        raise MpsimInputError(f"--switch-dist {text!r}: switch steps must be >= 0 and counts >= 0, "
                              "not all 0")
    return np.array(steps, dtype=np.int64), weights


def _histogram_from_csv(path: Path, scheduler: str) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            table = list(csv.DictReader(fh))
    except OSError as exc:
        raise MpsimInputError(f"{path}: cannot read ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise MpsimInputError(f"{path}: not a CSV text file ({exc})") from None
    for i, row in enumerate(table, start=1):
        if row.get("scheduler") == scheduler:
            hist = row.get("histogram") or ""
            if not hist.startswith("S="):
                raise MpsimInputError(f"{path}: row {i}: scheduler {scheduler!r} has no switch-point "
                                      f"histogram ({hist!r})")
            return hist.split()
    names = [r.get("scheduler") for r in table]
    raise MpsimInputError(f"{path}: no row for scheduler {scheduler!r}; it has {names}")


def build_requests(spec: ModelSpec, *, arrivals: str = "poisson", rate: float | None = None,
                   requests: int | None = None, duration_s: float | None = None,
                   prompt_len: str | int = 512, gen_len: str | int = 256, seed: int = 0,
                   switch_dist: str | None = None, allow_beyond: bool = False) -> Requests:
    """The requests a run's options describe: generated, or read from an arrivals CSV."""
    kind, _ = arrival_kind(arrivals)
    if kind == "csv":
        if rate is not None or duration_s is not None:
            raise MpsimInputError(f"--arrivals {arrivals}: the file's timestamps set the arrivals; "
                                  "drop --rate/--duration (--requests N keeps the first N rows)")
        if switch_dist is not None:
            raise MpsimInputError("--switch-dist: the arrivals CSV carries switch_step per request")
        return read_arrivals_csv(arrivals, spec, allow_beyond, requests)
    if rate is None:
        raise MpsimInputError(f"--arrivals {arrivals}: needs --rate (requests per second)")
    switches = parse_switch_dist(switch_dist) if switch_dist else None
    return generate(spec, rate=rate, arrivals=arrivals, requests=requests, duration_s=duration_s,
                    prompt=parse_lengths(prompt_len, "--prompt-len"), gen=parse_lengths(gen_len, "--gen-len"),
                    seed=seed, switch_steps=switches, allow_beyond=allow_beyond)
