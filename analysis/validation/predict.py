"""Predict every measured row: adapter -> launch rows -> `mpsim.sim.simulate` -> protocol costs.

Each measured row becomes the launches its call runs (adapter.launch_rows). All rows go through the
one door in a single trace, so identical launches are simulated once (memo, on disk by default);
a zero-byte barrier launch precedes each row's launches, so no row inherits L2 residency from an
unrelated neighbour (each measured call starts cold, as its first launch in a fresh trace would).

GEMMs take the model-guided best config (adapter.py); the configs found are kept on disk next to
the memo (`<cache_dir>/<namespace>.best-configs.json`, the namespace of the hardware, parameters
and model code), so a rerun skips the search.

Per measured row, with P its protocol (mpsim/sim/protocols.py) and n the GPU kernels its launches
stand for (mpsim.sim.gpu.library.launch_kernels: an FA3 row with its KV append is two):
    predicted_us = sum of the simulated kernel bodies + P's cost for one call of n launches
    roofline_us  = sum of the launches' t_lower (max(t_math, t_mem))    + the same cost
with the roofline as a performance model (mpsim.sim.roofline.roofline: every analytic byte at DRAM,
datasheet peaks), not the simulator's residency-aware lower bound.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.analysis.validation.adapter import (
    ConfigCache,
    LaunchGroup,
    UnrepresentableError,
    launch_rows,
)
from mpsim.analysis.validation.eager_host import host_floor_us
from mpsim.errors import MpsimInputError, warn
from mpsim.hw_models.schema import HardwareSpec
from mpsim.launch_plan import costed
from mpsim.progress import progress_bar
from mpsim.sim import DEFAULT_CACHE, simulate
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.memo import LaunchMemo, namespace
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import ProtocolFile, call_costs_us, shipped
from mpsim.sim.roofline import roofline
from mpsim.traces.atomic import write_json_atomic
from mpsim.traces.errors import OutputError
from mpsim.traces.trace import rows_to_frame


@dataclass
class Prediction:
    """Per measured row (NaN / blank where the status is not ok)."""

    predicted_us: np.ndarray
    roofline_us: np.ndarray
    kernel_us: np.ndarray     # sum of simulated kernel bodies (no protocol cost)
    lower_us: np.ndarray      # sum of t_lower
    t_math_us: np.ndarray
    t_mem_us: np.ndarray
    launches: np.ndarray
    config: np.ndarray
    status: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)


def barrier_row() -> dict[str, Any]:
    """A one-element launch that leaves nothing resident for the next one."""
    row = costed({"op": "other", "kernel": "residual_add_kernel", "module": "barrier", "m": 1, "n": 1,
                  "launch_id": 0, "stream": 0, "phase": "decode", "step": 0, "layer": 0,
                  "grid": [1], "config": {"num_warps": 1, "num_stages": 1, "split_k": 1,
                                           "block_n": 1}})
    row["bytes_written"] = 0
    return row


def _groups(rows: pd.DataFrame, hw: HardwareSpec, config: str, params: SimParams,
            configs: ConfigCache, status: np.ndarray, bar: Any) -> dict[int, LaunchGroup]:
    groups = {}
    for i, rec in enumerate(rows.to_dict("records")):
        bar.update(1)
        if status[i] != "ok":
            continue
        try:
            groups[i] = launch_rows(rec, hw, config, params, configs)
        except UnrepresentableError as exc:
            status[i] = f"unrepresentable: {exc}"
        if isinstance(configs, DiskConfigs) and i % 500 == 499:
            configs.save()  # an interrupted search keeps what it found
    return groups


class DiskConfigs(dict[str, str]):
    """Best GEMM configs by shape, read from and written to one JSON file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        if path.is_file():
            with contextlib.suppress(ValueError, AttributeError):  # a damaged cache: a new search
                self.update({str(k): str(v) for k, v in json.loads(path.read_text()).items()})
        self._size = len(self)

    def save(self) -> None:
        if len(self) != self._size:
            try:
                write_json_atomic(dict(sorted(self.items())), self.path)
            except OutputError as exc:  # a cache: the configs found are kept in memory
                warn(f"the best-config cache was not saved ({exc})")
            self._size = len(self)


def config_store(hw: HardwareSpec, params: SimParams, cache_dir: str | Path | None) -> ConfigCache:
    """The best-config cache of `hw` and `params`: on disk under `cache_dir`, else in memory."""
    if cache_dir is None:
        return {}
    return DiskConfigs(_cache(cache_dir) / f"{namespace(hw, params, 'best-configs')}.best-configs.json")


def _trace(groups: dict[int, LaunchGroup]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """One frame of every group's launches (a barrier before each); owner row and main flag."""
    barrier = barrier_row()
    launches, owner, main = [], [], []
    for i, g in groups.items():
        launches.append(barrier)
        owner.append(-1)
        main.append(False)
        for j, r in enumerate(g.launches):
            launches.append(r)
            owner.append(i)
            main.append(j == g.main)
    frame = rows_to_frame(launches)
    frame["launch_id"] = pd.array(np.arange(len(frame)), dtype="Int64")
    return frame, np.asarray(owner, dtype=np.int64), np.asarray(main, dtype=bool)


def _simulate(frame: pd.DataFrame, hw: HardwareSpec, params: SimParams, memo: LaunchMemo
              ) -> pd.DataFrame:
    return simulate(frame, hw, "sim", params=params, memo=memo, protocol="kernel").launches


def _per_group(frame: pd.DataFrame, owner: np.ndarray, hw: HardwareSpec, params: SimParams,
               memo: LaunchMemo, status: np.ndarray) -> pd.DataFrame:
    """The launches simulated group by group: a group the simulator rejects gets a status."""
    parts = []
    for i in np.unique(owner[owner >= 0]):
        sel = np.flatnonzero(owner == i)
        sub = frame.iloc[np.concatenate([[sel[0] - 1], sel])]
        try:
            parts.append(_simulate(sub, hw, params, memo).iloc[1:])
        except MpsimInputError as exc:
            status[i] = f"simulator error: {exc}"
            parts.append(pd.DataFrame(index=frame.index[sel]))
    return pd.concat(parts).reindex(frame.index)


def _sums(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    ok = owner >= 0
    total = np.bincount(owner[ok], weights=values[ok], minlength=n)
    seen = np.bincount(owner[ok], weights=np.isfinite(values[ok]).astype(float), minlength=n)
    total[seen < np.bincount(owner[ok], minlength=n)] = np.nan
    return total


def _configs(frame: pd.DataFrame, owner: np.ndarray, main: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, "", dtype=object)
    for pos in np.flatnonzero(main):
        r = frame.iloc[pos]
        out[owner[pos]] = json.dumps({"kernel": r["kernel"], "grid": json.loads(r["grid"]),
                                      **json.loads(r["config"])}, separators=(",", ":"))
    return out


CHUNK_ROWS = 2000  # rows simulated per call of the door: the disk memo is written after each


def _simulate_chunked(groups: dict[int, LaunchGroup], hw: HardwareSpec, params: SimParams,
                      memo: LaunchMemo, status: np.ndarray, bar: Any
                      ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, pd.DataFrame]:
    """Frame, owner, main flag and simulated launches of every group, CHUNK_ROWS rows at a time
    (an interrupted run keeps what the memo already holds)."""
    keys = list(groups)
    frames, owners, mains, sims = [], [], [], []
    for lo in range(0, len(keys), CHUNK_ROWS):
        frame, owner, main = _trace({i: groups[i] for i in keys[lo:lo + CHUNK_ROWS]})
        try:
            sim = _simulate(frame, hw, params, memo)
        except MpsimInputError:
            sim = _per_group(frame, owner, hw, params, memo, status)
        frames.append(frame)
        owners.append(owner)
        mains.append(main)
        sims.append(sim)
        bar.update(len(keys[lo:lo + CHUNK_ROWS]))
    return (pd.concat(frames, ignore_index=True), np.concatenate(owners), np.concatenate(mains),
            pd.concat(sims, ignore_index=True))


def predict_rows(rows: pd.DataFrame, hw: HardwareSpec, *, config: str = "best",
                 cache_dir: str | Path | None = DEFAULT_CACHE, params: SimParams = DEFAULT_PARAMS,
                 protocols: ProtocolFile | None = None, memo: LaunchMemo | None = None,
                 configs: ConfigCache | None = None, progress: bool | None = None) -> Prediction:
    """Predict the measured rows (the normalized frame of measured.py) on `hw`. `configs`: best
    GEMM configs already found (default: the disk cache under `cache_dir`). `progress`: bars on
    stderr (None: when stderr is a terminal or MPSIM_PROGRESS=1)."""
    start = time.perf_counter()
    n, table = len(rows), protocols or shipped()
    status = rows["status"].astype(str).to_numpy(dtype=object).copy()
    configs = config_store(hw, params, cache_dir) if configs is None else configs
    with progress_bar(n, f"{hw.name}: launches and configs", "row", progress) as bar:
        groups = _groups(rows, hw, config, params, configs, status, bar)
    if isinstance(configs, DiskConfigs):
        configs.save()
    nan = np.full(n, np.nan)
    if not groups:
        return Prediction(nan, nan.copy(), nan.copy(), nan.copy(), nan.copy(), nan.copy(),
                          np.zeros(n, dtype=np.int64), np.full(n, "", dtype=object), status,
                          {"wall_s": time.perf_counter() - start, "launches": 0})
    memo = memo or LaunchMemo(None if cache_dir is None else _cache(cache_dir))
    hits, misses = memo.hits, memo.misses
    with progress_bar(len(groups), f"{hw.name}: simulate", "row", progress) as bar:
        frame, owner, main, sim = _simulate_chunked(groups, hw, params, memo, status, bar)
    kernels = np.array([launch_kernels(r) for r in frame[["kernel", "config"]].to_dict("records")])
    count = np.bincount(owner[owner >= 0], weights=kernels[owner >= 0], minlength=n).astype(np.int64)
    plain = roofline(frame, hw)
    sums = {c: _sums((sim if c == "kernel_s" else plain)[c].to_numpy(dtype=float) * 1e6, owner, n)
            for c in ("kernel_s", "t_lower_s", "t_math_s", "t_mem_s")}
    cost = call_costs_us(rows["protocol"], count, table)
    ok = status == "ok"
    pred = np.where(ok, sums["kernel_s"] + cost, np.nan)
    roof = np.where(ok, sums["t_lower_s"] + cost, np.nan)
    host = host_floor_us(rows, hw.name)  # eager calls of a known host path: the longer of host and GPU
    if np.isfinite(host).any():
        gaps = call_costs_us(pd.Series(["graph"] * n), count, table)
        at = ok & np.isfinite(host)
        pred[at] = np.maximum(host[at], sums["kernel_s"][at] + gaps[at])
        roof[at] = np.maximum(host[at], sums["t_lower_s"][at] + gaps[at])
    stats = {"wall_s": time.perf_counter() - start, "launches": len(frame),
             "simulated": memo.misses - misses, "memo_hits": memo.hits - hits}
    return Prediction(pred, roof, np.where(ok, sums["kernel_s"], np.nan),
                      np.where(ok, sums["t_lower_s"], np.nan), np.where(ok, sums["t_math_s"], np.nan),
                      np.where(ok, sums["t_mem_s"], np.nan), count,
                      np.where(ok, _configs(frame, owner, main, n), ""), status, stats)


def _cache(cache_dir: str | Path) -> Path:
    from mpsim.sim.memo import default_cache_dir

    return default_cache_dir() if cache_dir == DEFAULT_CACHE else Path(cache_dir)
