"""The serving part of `mpsim demo`: a small serve sweep (analysis/specs/serve-demo.yaml, priced by the
roofline to fit the demo's time), one run's iterations, the three serving charts and the SLO lines,
which say which performance model priced them (the README's serving chart is the simulator's)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from mpsim.analysis.plots.serve import plot_serve_capacity, plot_serve_latency, plot_serve_timeline
from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.serve import slo_lines
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.policy import parse_policy
from mpsim.serve.arrivals import build_requests
from mpsim.serve.engine import run_serve

SPEC = "specs/serve-demo.yaml"
TIMELINE = ("fp16", 36.0)  # the run drawn over time: policy, rate


def model_note(perf_model: str) -> str:
    """Which performance model prices the demo's serving, and that the README's chart is another's."""
    if perf_model == "roofline":
        return ("priced by the roofline, to fit the demo's time; the serving chart of the README and "
                "docs/serving.md is the simulator's and can rank the policies differently")
    return f"priced by {perf_model}"


def serve_demo(out: Path, workers: int | None = None, progress: bool = False) -> Iterator[str]:
    """Run the demo's serve sweep into OUT/serve, draw OUT/figures/serve-*.png; yield report lines."""
    spec = parse_spec(resources.files("mpsim.analysis").joinpath(SPEC).read_text(encoding="utf-8"),
                      f"mpsim.analysis/{SPEC}")
    outcome = run_sweep(spec, out / "serve", workers=workers, progress=progress)
    table = outcome.serve_table
    assert table is not None and spec.serve is not None
    priced = spec.serve.settings["perf_model"]
    yield (f"serving ({model_note(priced)}): {len(table)} points ({outcome.computed} computed now) in "
           f"{outcome.seconds:.1f} s; wrote {outcome.serve_path}")
    figures = out / "figures"
    for paths in (plot_serve_latency(table, figures / "serve-latency.png"),
                  plot_serve_capacity(table, figures / "serve-capacity.png")):
        yield "wrote " + ", ".join(str(p) for p in paths)
    model, (name, hw) = spec.models[0], next(iter(spec.hardware.items()))  # the file's name, its spec
    policy, rate = TIMELINE
    s = spec.serve.settings
    reqs = build_requests(model, rate=rate, requests=s["requests"], prompt_len=s["prompt_len"],
                          gen_len=s["gen_len"], seed=s["seed"])
    run = run_serve(model, parse_policy(policy), hw, reqs, spec.serve.config())
    title = f"{model.name} {policy} on {name}: {s['requests']} requests at {rate:g}/s, priced by {priced}"
    yield "wrote " + ", ".join(str(p) for p in plot_serve_timeline(run.iterations, title,
                                                                    figures / "serve-timeline.png"))
    yield from slo_lines(table)
