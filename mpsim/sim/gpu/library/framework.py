"""What the row-wise rooms of other frameworks (vllm.py, torch.py) share: a launch of one kernel
whose CTAs run one at a time per slot (no occupancy model: the work's own latency and rounds say it).
"""

from __future__ import annotations

from mpsim.sim.gpu.occupancy import Occupancy
from mpsim.sim.gpu.work import KernelPart, KernelWork, LaunchWork


def one_part(work: KernelWork) -> LaunchWork:
    """A launch of one kernel, one CTA per SM slot at a time."""
    return [KernelPart(work, Occupancy(1, 1, False, "kernel"))]
