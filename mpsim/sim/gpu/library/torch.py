"""PyTorch's vectorized elementwise add (`torch_add` rows) as CTA work (name, config and row
builder: mpsim/library/torch.py).

Row: op other, n hidden; config `l2_warm` 1: the second input is the previous kernel's output.
A grid-stride vectorized stream: one iteration's round trip, then its bytes at HBM bandwidth; its
second input is read from L2 when the row is `l2_warm` and it fits. Constant: TorchParams.add_iter_ns,
SimParams.torch (Vidur rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.library.torch import KERNELS
from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.memory import usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class TorchParams:
    """PyTorch's elementwise add (Vidur rows); SimParams.torch (`--fit-params torch.NAME`). Where a
    value came from: mpsim/sim/params.py's docstring names the row sets."""

    add_iter_ns: float = 592.9           # the add's first grid-stride iteration (same round trip)


def torch_add_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    tokens = int(row["m"])
    act = tokens * int(row["n"]) * FP16
    warm = bool(int(cfg.get("l2_warm", 0))) and act <= usable_l2(r, p)
    credit = act if warm else min(resident, act)
    count = r.sms
    trip = Trip((3 * act - credit) / count, 0.0, latency_ns=p.torch.add_iter_ns)
    res = CtaResources(4, 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(0.0), (1,), "single", count, count, res, 3 * act - credit,
                      name="torch add")
    return one_part(work)


def elementwise_part(elements: float, read: float, written: float, r: GpuRates, p: SimParams,
                     name: str) -> KernelPart:
    """One PyTorch vectorized elementwise kernel (a cast, a clone) over `elements` elements, `read`
    and `written` bytes each, priced as the add is: one round trip (`add_iter_ns`), then the bytes
    at HBM bandwidth over one CTA per SM."""
    ctas = r.sms
    trip = Trip(elements * read / ctas, 0.0, latency_ns=p.torch.add_iter_ns)
    work = KernelWork(trip, Epilogue(elements * written / ctas), (1,), "single", ctas, ctas,
                      CtaResources(4, 0.0, 0.0, 1, 32), elements * read,
                      dram_write_bytes=elements * written, name=name)
    return KernelPart(work, Occupancy(1, 1, False, "kernel"))


WORK = dict.fromkeys(KERNELS, torch_add_work)
