"""Kernel timing for the GPU benchmarks: cold-L2 CUDA-event medians, and the CSV they go to.

Shared by analysis/bench/kernels.py (GEMM) and the attention benchmark. Each timed run:
1. flush L2 by writing a 256 MB buffer (larger than any Hopper/Ada L2), so weights come from HBM;
2. stall the GPU for ~1 ms (torch.cuda._sleep) so the host can enqueue the start event, the kernel
   launch (whose Python launcher costs tens of microseconds) and the end event before the GPU gets
   there: the events then bracket the kernel alone, not the host's launch overhead;
3. time fn() between two CUDA events.
All events are read after one synchronize; the statistic is the median over repeats (p10/p90 kept).
A dry run (no CUDA, the Triton interpreter) times with the host clock and says so in `timer`.
"""

from __future__ import annotations

import csv
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch

FLUSH_BYTES = 256 * 2**20
# ~1 ms at H200's 1980 MHz: the first H200 run (2026-12-04) stalled 50 us, shorter than mpsim's
# launchers take on the host, and its medians held launch overhead (int2 p10 28.5 us, median 87)
SLEEP_CYCLES = 2_000_000
CUDA_TIMER = "cuda-events (cold L2, median)"
HOST_TIMER = "host wall clock (Triton interpreter dry run; not a GPU time)"


@dataclass(frozen=True)
class Timing:
    median_us: float
    p10_us: float
    p90_us: float
    repeats: int
    timer: str


class Timer:
    """Times callables on one device; holds the L2-flush buffer so it is allocated once."""

    def __init__(self, device: torch.device, repeats: int = 50, warmup: int = 5) -> None:
        if repeats < 1 or warmup < 0:
            raise ValueError(f"repeats={repeats} must be >= 1 and warmup={warmup} >= 0")
        self.device = device
        self.repeats = repeats
        self.warmup = warmup
        self.cuda = device.type == "cuda"
        flush_bytes = FLUSH_BYTES if self.cuda else 2**20
        self._flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)

    def time(self, fn: Callable[[], object]) -> Timing:
        for _ in range(self.warmup):  # compile, autotune caches, workspace allocation
            fn()
        samples = self._cuda_samples(fn) if self.cuda else self._host_samples(fn)
        return summarize(samples, CUDA_TIMER if self.cuda else HOST_TIMER)

    def _cuda_samples(self, fn: Callable[[], object]) -> list[float]:
        pairs = []
        for _ in range(self.repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            self._flush.zero_()
            torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in pairs]

    def _host_samples(self, fn: Callable[[], object]) -> list[float]:
        samples = []
        for _ in range(self.repeats):
            self._flush.zero_()
            t0 = time.perf_counter_ns()
            fn()
            samples.append((time.perf_counter_ns() - t0) / 1e3)
        return samples


def summarize(samples: list[float], timer: str) -> Timing:
    """Median and 10th/90th percentiles (nearest rank) of per-run microseconds."""
    if not samples:
        raise ValueError("summarize: no samples")
    ordered = sorted(samples)
    rank = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return Timing(statistics.median(ordered), rank(0.1), rank(0.9), len(ordered), timer)


def environment(device: torch.device) -> dict[str, str]:
    """Who measured: device name, torch/triton/CUDA versions, host."""
    import triton

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (interpreter)"
    return {"device": name, "torch_version": torch.__version__,
            "triton_version": triton.__version__, "cuda_version": str(torch.version.cuda),
            "host": platform.node()}


def copy_fn(nbytes: int, device: torch.device) -> Callable[[], object]:
    """A device-to-device copy of nbytes: the bandwidth ceiling for a kernel that reads nbytes."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


class CsvTable:
    """A tidy CSV: fixed columns, one row per measurement, flushed as it goes (a crash keeps rows)."""

    def __init__(self, path: Path, columns: Iterable[str]) -> None:
        self.path = path
        self.columns = list(columns)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=self.columns)
        self._writer.writeheader()
        self.rows = 0

    def write(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise ValueError(f"row has columns {sorted(unknown)} not in the table's {self.columns}")
        self._writer.writerow({c: _cell(row.get(c)) for c in self.columns})
        self._file.flush()
        self.rows += 1

    def close(self) -> None:
        self._file.close()


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value
