"""Validate mpsim/sim/collectives.py against the measured collectives of ../shared/groundtruth.

    python -m mpsim.analysis.validation.collectives [GROUNDTRUTH_DIR]

Reads aiconfigurator's nccl_perf.parquet (nccl-tests loops, out-of-place time, no CUDA graph) and
custom_allreduce_perf.parquet (vLLM graph/eager, TRT-LLM graph) per GPU. `message_size` is in
elements of the dtype (collector/network/collect_nccl.py logs `size // bytes_per_element`;
collect_all_reduce.py passes the element count to the tensor shape): half/bfloat16 2 bytes, int8 1.
Fits each node's constants on the 2- and 8-GPU rows and checks them on the 4-GPU rows (held out on
every GPU, L40S included), then prints the MAPE per GPU, group size, op and message band, the model
against the plain bound (docs/collectives.md). Exits 0 with a reason when the data is absent.
"""

from __future__ import annotations

import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.hw_models.node import load_node
from mpsim.sim.collectives import HW_LAT_US, NodeFit, custom_allreduce_time, nccl_time, plain_bound

DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared" / "groundtruth"
GPUS = {"h100_sxm": ("h100-sxm", "hopper"), "h200_sxm": ("h200-sxm", "hopper"),
        "b200_sxm": ("b200-sxm", "blackwell"), "l40s": ("l40s", "ada")}
DTYPE_BYTES = {"half": 2, "int8": 1, "bfloat16": 2}
FIT_GPUS, HELD_OUT = (2, 8), 4
BANDS = ((0, 64 << 10, "<=64KiB"), (64 << 10, 4 << 20, "64KiB-4MiB"), (4 << 20, np.inf, ">4MiB"))
NCCL_KNOBS = ("nccl_efficiency", "nccl_allreduce_efficiency", "nccl_latency_scale", "nccl_hop_scale",
              "group_penalty", "nvls_fraction", "pcie_exponent")
CUSTOM_KNOBS = ("custom_efficiency", "custom_latency_us", "vllm_extra_us", "vllm_twoshot_us")
TWOSHOT_KNOBS = ("trtllm_twoshot_efficiency", "trtllm_twoshot_us")
EAGER_KNOBS = ("eager_floor_us", "eager_other_floor_us")


def load_rows(root: Path) -> pd.DataFrame:
    """One row per measurement: gpu, source (nccl, vllm_graph, vllm_eager, trtllm), op, n, bytes,
    measured_us."""
    parts = []
    for folder in GPUS:
        for path in sorted((root / "aiconfigurator" / folder / "comm").glob("*/*/*.parquet")):
            d = pd.read_parquet(path)
            dtype = d["nccl_dtype"] if "nccl_dtype" in d else d["allreduce_dtype"]
            if "nccl_dtype" in d:
                source = pd.Series("nccl", index=d.index)
            else:
                source = d["backend"] if "backend" in d else pd.Series("trtllm", index=d.index)
            parts.append(pd.DataFrame({
                "gpu": folder, "source": source, "op": d["op_name"], "n": d["num_gpus"].astype(int),
                "bytes": d["message_size"] * dtype.map(DTYPE_BYTES), "measured_us": d["latency"] * 1e3,
                "file": str(path.relative_to(root))}))
    rows = pd.concat(parts, ignore_index=True)
    return rows[rows["op"] != "alltoall"].reset_index(drop=True)  # no alltoall in the model yet


def predict(row: pd.Series, fit: NodeFit) -> float:
    op, n, nbytes = row["op"], int(row["n"]), float(row["bytes"])
    if row["source"] == "nccl":
        return nccl_time(op, nbytes, n, fit).time_us
    graph = row["source"] != "vllm_eager"
    if row["source"] == "trtllm":
        return custom_allreduce_time(nbytes, n, fit, "trtllm", graph=graph).time_us
    return custom_allreduce_time(nbytes, n, fit, "vllm", graph=graph).time_us


def plain(row: pd.Series, fit: NodeFit) -> float:
    hop = HW_LAT_US["nvlink" if fit.topology == "nvswitch" else "pcie"]["ring"]["LL"]
    return plain_bound(row["op"], float(row["bytes"]), int(row["n"]), fit.link_gbps, hop)


def _mape(fit: NodeFit, rows: pd.DataFrame) -> float:
    pred = np.array([predict(r, fit) for _, r in rows.iterrows()])
    return float(np.mean(np.abs(pred - rows["measured_us"].to_numpy()) / rows["measured_us"].to_numpy()))


def _search(fit: NodeFit, knobs: tuple[str, ...], rows: pd.DataFrame) -> NodeFit:
    """Pattern search on the MAPE: each knob up or down by a factor that halves when nothing helps."""
    best, step = _mape(fit, rows), 0.5
    while step > 0.01:
        moved = False
        for knob in knobs:
            for sign in (1, -1):
                value = getattr(fit, knob)
                moved_to = value * (1 + sign * step) if value else step * sign
                new: dict[str, Any] = {knob: 0.0 if abs(moved_to) < 1e-9 else moved_to}  # a true zero
                trial = replace(fit, **new)
                if getattr(trial, knob) < 0:
                    continue
                err = _mape(trial, rows)
                if err < best:
                    fit, best, moved = trial, err, True
        if not moved:
            step /= 2
    return fit


def fit_node(folder: str, rows: pd.DataFrame) -> NodeFit:
    """Fit one GPU's constants on its FIT_GPUS rows (NCCL first, then the custom kernels, then eager)."""
    name, arch = GPUS[folder]
    node = load_node(name)
    fit = NodeFit(link_gbps=node.link_gbps(), topology=node.topology, arch=arch,  # type: ignore[arg-type]
                  nvls=bool(node.nvlink and node.nvlink.nvls), nccl_efficiency=0.6,
                  nccl_allreduce_efficiency=0.6,
                  nvls_fraction=0.5 if node.topology == "nvswitch" else 0.0,
                  custom_latency_us=3.0, custom_efficiency=0.5,
                  pcie_exponent=1.0 if node.topology == "pcie" else 0.0)
    train = rows[(rows["gpu"] == folder) & rows["n"].isin(FIT_GPUS)]
    knobs = NCCL_KNOBS[:4] + (NCCL_KNOBS[6:] if node.topology == "pcie" else NCCL_KNOBS[4:6])
    fit = _search(fit, knobs, train[train["source"] == "nccl"])
    graph = train[train["source"].isin(["trtllm", "vllm_graph"])]
    if len(graph):
        fit = _search(fit, CUSTOM_KNOBS, graph)
        trt = graph[graph["source"] == "trtllm"]
        if len(trt):  # TRT-LLM's two-shot kernel on its own rows, then everything again
            fit = replace(fit, trtllm_twoshot_efficiency=fit.custom_efficiency, trtllm_twoshot_us=1.0)
            fit = _search(fit, TWOSHOT_KNOBS, trt)
            fit = _search(fit, CUSTOM_KNOBS + TWOSHOT_KNOBS, graph)
    eager = train[train["source"] == "vllm_eager"]
    if len(eager):
        fit = replace(fit, eager_floor_us=20.0, eager_other_floor_us=20.0)
        fit = _search(fit, EAGER_KNOBS, eager)
    return fit


def band(nbytes: float) -> str:
    return next(label for lo, hi, label in BANDS if lo < nbytes <= hi)


def evaluate(rows: pd.DataFrame, fits: dict[str, NodeFit]) -> pd.DataFrame:
    """Per row: model and plain-bound predictions and their absolute relative errors."""
    out = rows.copy()
    out["model_us"] = [predict(r, fits[r["gpu"]]) for _, r in rows.iterrows()]
    out["plain_us"] = [plain(r, fits[r["gpu"]]) for _, r in rows.iterrows()]
    out["model_err"] = (out["model_us"] - out["measured_us"]).abs() / out["measured_us"]
    out["plain_err"] = (out["plain_us"] - out["measured_us"]).abs() / out["measured_us"]
    out["band"] = out["bytes"].map(band)
    out["kind"] = np.where(out["source"] == "nccl", "nccl " + out["op"], out["source"])
    out["held_out"] = out["n"] == HELD_OUT
    return out


def summary(ev: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) per GPU, group size, kind and band; model vs plain bound."""
    keys = ["gpu", "kind", "n", "band"]
    g = ev.groupby(keys, sort=False)
    table = g.agg(rows=("model_err", "size"), model_mape=("model_err", "mean"),
                  plain_mape=("plain_err", "mean"), held_out=("held_out", "first")).reset_index()
    table[["model_mape", "plain_mape"]] *= 100
    return table


def markdown(table: pd.DataFrame, fits: dict[str, NodeFit]) -> str:
    """One line per GPU, collective and group size: model / plain-bound MAPE (%) per band (rows)."""
    labels = [label for _, _, label in BANDS]
    lines = ["| GPU | collective | GPUs | " + " | ".join(labels) + " |",
             "|---|---|---|" + "---|" * len(labels)]
    for (gpu, kind, n), grp in table.groupby(["gpu", "kind", "n"], sort=False):
        cells = []
        for label in labels:
            hit = grp[grp["band"] == label]
            cells.append("" if hit.empty else f"{hit['model_mape'].iloc[0]:.1f} / "
                         f"{hit['plain_mape'].iloc[0]:.1f} ({hit['rows'].iloc[0]})")
        mark = " (held out)" if n == HELD_OUT else ""
        lines.append(f"| {gpu} | {kind} | {n}{mark} | " + " | ".join(cells) + " |")
    lines += ["", "| GPU | " + " | ".join(f.name for f in fields(NodeFit)) + " |",
              "|---|" + "---|" * len(fields(NodeFit))]
    for gpu, fit in fits.items():
        vals = [getattr(fit, f.name) for f in fields(NodeFit)]
        lines.append(f"| {gpu} | " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v)
                                                 for v in vals) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else DEFAULT_ROOT
    if not (root / "aiconfigurator").is_dir():
        print(f"skipped: no measured collectives at {root / 'aiconfigurator'} (docs/collectives.md)")
        return 0
    rows = load_rows(root)
    fits = {folder: fit_node(folder, rows) for folder in GPUS if (rows["gpu"] == folder).any()}
    ev = evaluate(rows, fits)
    print(markdown(summary(ev), fits))
    fitted_on = ", ".join(map(str, FIT_GPUS))
    print(f"\nFitted on the rows with num_gpus in {fitted_on} (checked on {HELD_OUT}) of:")
    for path in sorted(rows["file"].unique()):
        print(f"- {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
