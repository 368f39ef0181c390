"""Autotuning of the GEMM/GEMV launches on a GPU over launch_config.gemm_candidates.

On a CUDA device, the first launch of each distinct shape (kernel family, M, N, K, weight format,
bits, group, bias, device) times every candidate config of the device's architecture with
triton.testing.do_bench (median of repeated runs after a warm-up, all outside any capture) and keeps
the fastest; that launch and every later one of the shape run it, and a captured trace row records
the config that ran. The candidate set is the one `mpsim op --config best` and
`mpsim synth --hw H --config best` search with the simulator, so a capture's configs can be compared
with the model's choice.

Under the Triton interpreter nothing is timed (host wall time says nothing about a GPU): the
launchers run the fixed heuristic `gemm_config` and this module is not consulted. MPSIM_AUTOTUNE=0
keeps the heuristic on a GPU too, as synthesis without --hw records it (to compare a capture with a
synthesized trace launch for launch).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from mpsim.kernels.launch_config import LaunchConfig

ENV = "MPSIM_AUTOTUNE"
_ON = ("1", "true", "yes", "on", "")
_OFF = ("0", "false", "no", "off")

Timer = Callable[[Callable[[], object]], float]


def enabled() -> bool:
    """MPSIM_AUTOTUNE: on unless set to 0/false/no/off; any other value is an error naming it."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"{ENV}={os.environ[ENV]!r}: expected 1/0 (or true/false, yes/no, on/off)")


def gpu_arch(capability: tuple[int, int]) -> str:
    """The candidate set for a CUDA compute capability: sm_90 and newer take Hopper's tiles
    (the largest shared memory), sm_80..89 (A100, L40S, RTX 4090) Ampere's."""
    major, minor = capability
    if major >= 9:
        return "hopper"
    if major == 8:
        return "ampere"
    raise ValueError(f"compute capability {major}.{minor}: mpsim's GEMM kernels target sm_80 and "
                     "newer (Ampere, Ada, Hopper)")


def do_bench_median(fn: Callable[[], object]) -> float:
    """Milliseconds per call of fn on the GPU: Triton's do_bench median (it flushes L2 between
    runs, so every candidate reads its weights from HBM as a decode step does)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=5, rep=20, return_mode="median"))


@dataclass(frozen=True)
class Tuned:
    """One tuned shape: the winner, its time, and how many candidates ran or could not launch."""
    config: LaunchConfig
    ms: float
    timed: int
    skipped: tuple[str, ...]


class Tuner:
    """The fastest candidate per shape key, timed once per process."""

    def __init__(self, timer: Timer | None = None) -> None:
        self._timer = timer
        self.tuned: dict[Hashable, Tuned] = {}

    def best(self, key: Hashable, candidates: Sequence[LaunchConfig],
             trial: Callable[[LaunchConfig], object]) -> LaunchConfig:
        """The fastest of `candidates` for `key` (the first of equal times), timing trial(cfg)
        for each on the first call. A candidate the device cannot run (Triton's OutOfResources:
        too much shared memory or too many registers for this GPU) is skipped and named in
        `tuned[key].skipped`; if none can run, the error names the key and every reason."""
        if key in self.tuned:
            return self.tuned[key].config
        if not candidates:
            raise ValueError(f"autotune {key}: no candidate configs")
        from triton.runtime.errors import OutOfResources

        timer = self._timer or do_bench_median
        timed: list[tuple[float, int, LaunchConfig]] = []
        skipped: list[str] = []
        for i, cfg in enumerate(candidates):
            try:
                ms = timer(_bound(trial, cfg))
            except OutOfResources as e:
                skipped.append(f"{cfg.config_dict()}: {e}")
                continue
            timed.append((ms, i, cfg))
        if not timed:
            raise RuntimeError(f"autotune {key}: no candidate could launch: " + "; ".join(skipped))
        ms, _, cfg = min(timed, key=lambda t: (t[0], t[1]))
        self.tuned[key] = Tuned(cfg, ms, len(timed), tuple(skipped))
        return cfg


def _bound(trial: Callable[[LaunchConfig], object], cfg: LaunchConfig) -> Callable[[], object]:
    return lambda: trial(cfg)


TUNER = Tuner()
