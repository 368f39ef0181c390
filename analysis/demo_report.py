"""What `mpsim demo` draws and prints from a sweep's table: the charts and a short summary.

The summary is the geometric mean over models of each policy's speedup over fp16, per device and
workload, with the policy's average decode bits counted both ways.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.plots.common import pick_perf_model
from mpsim.analysis.plots.energy import plot_energy
from mpsim.analysis.plots.inputs import run_title, trace_run
from mpsim.analysis.plots.memory import plot_memory
from mpsim.analysis.plots.roofline import plot_roofline
from mpsim.analysis.plots.speedup import plot_speedup
from mpsim.analysis.plots.timeline import plot_timeline
from mpsim.analysis.plots.validation import plot_validation, validation_frame
from mpsim.analysis.validation.captures import hw_for_device
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec, get_model
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.io import read_trace
from mpsim.workload import Workload

# The run drawn as a roofline and a timeline: PMPD's progressive policy on its kind of NPU and a GPU.
SHOWCASE = ("vicuna-7b", "ap4-4@64-3", Workload(512, 256, 1))
SHOWCASE_HW = ("npu-llm", "h100-sxm")


def draw_figures(table: pd.DataFrame, folder: Path, models: Mapping[str, ModelSpec] | None = None,
                 hardware: Mapping[str, HardwareSpec] | None = None) -> Iterator[str]:
    """Write the demo's charts into `folder`, yielding one line per chart written or skipped.

    `models` and `hardware`: the sweep's own specs by the names its table uses (a spec may name a
    config.json or a hardware YAML, which the table knows only by their `name`); names missing
    from them are looked up as presets and shipped hardware."""
    pm = pick_perf_model(table, None)
    for model in dict.fromkeys([pm, *table["perf_model"]]):
        name = "speedup.png" if model == pm else f"speedup-{model}.png"
        yield _wrote(plot_speedup(table, folder / name, model))
    yield _wrote(plot_memory(table, folder / "memory.png", models))
    if "j_per_token" in table.columns and table["j_per_token"].notna().any():
        yield _wrote(plot_energy(table, folder / "energy.png", pm))
    model_name, policy, wl, hw_names = showcase(table)
    model = (models or {}).get(model_name) or get_model(model_name)
    trace = synthesize(model, parse_policy(policy), wl)
    for hw_name in hw_names:
        hw = (hardware or {}).get(hw_name) or load_hardware(hw_name)
        run = trace_run(trace, hw, pm)
        title = run_title(trace, hw, pm)
        yield _wrote(plot_roofline(run, hw, title, folder / f"roofline-{hw_name}.png"))
        yield _wrote(plot_timeline(run, title, folder / f"timeline-{hw_name}.png"))
    yield from draw_validation(folder, pm)


def showcase(table: pd.DataFrame) -> tuple[str, str, Workload, list[str]]:
    """The run to draw as roofline and timeline: SHOWCASE if the table has it, else its first point."""
    model, policy, wl = SHOWCASE
    hws = [h for h in SHOWCASE_HW if h in set(table["hw"])]
    has = table[(table["model"] == model) & (table["policy"] == policy)
                & (table["prompt_len"] == wl.prompt_len) & (table["gen_len"] == wl.gen_len)
                & (table["batch"] == wl.batch)]
    if len(has) and hws:
        return model, policy, wl, hws
    first = table[table["policy"] != "fp16"].iloc[0] if (table["policy"] != "fp16").any() else table.iloc[0]
    return (str(first["model"]), str(first["policy"]),
            Workload(int(first["prompt_len"]), int(first["gen_len"]), int(first["batch"])),
            [str(first["hw"])])


def _wrote(paths: list[Path]) -> str:
    return "wrote " + ", ".join(str(p) for p in paths)


def draw_validation(folder: Path, perf_model: str, data: Traversable | None = None) -> Iterator[str]:
    """validation.png from the first captured trace (of a known GPU) in traces/data, if there is one."""
    data = data or resources.files("mpsim.traces").joinpath("data")
    captured = sorted(_parquet_files(data), key=lambda p: p.name)
    for item in captured:
        trace = read_trace(str(item))
        device = str(trace.rows["device"].dropna().iloc[0]) if trace.rows["device"].notna().any() else ""
        hw_name = hw_for_device(device)
        if hw_name is None or trace.rows["measured_us"].isna().all():
            continue
        hw = load_hardware(hw_name)
        run = trace_run(trace, hw, perf_model)
        yield _wrote(plot_validation(validation_frame(run), f"{item.name} ({device})",
                                     folder / "validation.png"))
        return
    yield "validation chart: skipped (no captured trace with measured times in traces/data)"


def _parquet_files(folder: Traversable) -> list[Traversable]:
    """Parquet files in `folder` and its subfolders one level down (traces/data/<device>/...)."""
    if not folder.is_dir():
        return []
    found = []
    for item in folder.iterdir():
        if item.is_dir():
            found += [p for p in item.iterdir() if p.name.endswith(".parquet")]
        elif item.name.endswith(".parquet"):
            found.append(item)
    return found


def summary_text(table: pd.DataFrame, left_out: str = "") -> str:
    """The geometric-mean speedups per workload; `left_out` names the pairs the spec excluded (shown
    as -)."""
    pm = pick_perf_model(table, None)
    data = table[table["perf_model"] == pm]
    parts = [f"Speedup over fp16 (end-to-end tokens/s), geometric mean over "
             f"{', '.join(dict.fromkeys(data['model']))}; perf model {pm}:"]
    for (p, g, b), sel in data.groupby(["prompt_len", "gen_len", "batch"], sort=False):
        pivot = sel.pivot_table(index="policy", columns="hw", values="speedup_vs_fp16",
                                aggfunc=_geomean, sort=False)
        bits = sel.groupby("policy", sort=False)[["avg_bits_pmpd", "avg_bits_mean"]].first()
        shown = pd.concat([bits.rename(columns={"avg_bits_pmpd": "bits(PMPD)",
                                                "avg_bits_mean": "bits(mean)"}), pivot], axis=1)
        shown = shown.round({"bits(PMPD)": 3, "bits(mean)": 3, **{h: 2 for h in pivot.columns}})
        parts += ["", f"prompt {p}, {g} new tokens, batch {b}:", shown.to_string(na_rep="-")]
    if left_out:
        parts += ["", f"-: left out by the spec's exclude ({left_out})"]
    return "\n".join(parts)


def _geomean(x: pd.Series) -> float:
    return float(np.exp(np.log(x.to_numpy(dtype=float)).mean()))
