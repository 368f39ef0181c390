"""Paged KV cache: how many blocks fit, and how many a sequence holds.

Capacity = device memory x gpu_memory_utilization - weights under the policy - activation workspace,
in blocks of `block_size` tokens of every layer's K and V at the policy's KV bits (codes plus an fp16
scale and zero per token per head when quantized: mpsim.traces.accounting, docs/formats.md). The
workspace is mpsim.memory's activation peak for one iteration of `budget` tokens, plus the fp16
logits of every sequence of the iteration. Blocks are counted, not placed: a sequence of t cached
tokens holds ceil(t / block_size) blocks.

Under a parallel plan (mpsim/parallel.py, `--tp`/`--pp`) every device holds its share: the capacity
is what the most loaded device holds (its stage's layers at one rank's shapes, mpsim.memory
device_weights_bytes and device_kv_bytes_per_token), a block being block_size tokens of the whole
model over all tp x pp devices; the workspace is one rank's (its share of the heads and FFN, the
full hidden width and the gathered logits).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec, NpuSpec
from mpsim.memory import device_kv_bytes_per_token, device_weights_bytes, peak_activation_bytes
from mpsim.models import ModelSpec
from mpsim.parallel import SINGLE, ParallelPlan, rank_spec
from mpsim.policy import Policy
from mpsim.serve.config import SchedulerConfig
from mpsim.traces.accounting import FP16, kv_bytes_per_token_head
from mpsim.workload import Workload


@dataclass(frozen=True)
class KvCapacity:
    device_bytes: int
    usable_bytes: int       # device x gpu_memory_utilization
    weights_bytes: int
    workspace_bytes: int
    kv_bytes_per_token: int
    block_size: int
    num_blocks: int
    watermark_blocks: int   # kept free when admitting a new request
    devices: int = 1        # tp x pp: the figures above are one (the most loaded) device's

    @property
    def tokens(self) -> int:
        return self.num_blocks * self.block_size

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def blocks_for_array(self, tokens: np.ndarray) -> np.ndarray:
        return -(-tokens // self.block_size)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def kv_bytes_per_token(spec: ModelSpec, kv_bits: int, kv_format: str | None = None) -> int:
    """K and V of one token over every layer and KV head (what memory.kv_cache_bytes counts);
    `kv_format` fp8-e4m3: 1 B values without per-token scales (None: by bits)."""
    return spec.num_layers * spec.num_kv_heads * 2 * kv_bytes_per_token_head(spec.head_dim, kv_bits,
                                                                             kv_format)


def device_bytes(hw: HardwareSpec) -> int:
    if not isinstance(hw, GpuSpec | NpuSpec):
        raise MpsimInputError(f"hardware {hw.name!r}: expected a GPU or NPU file, got {type(hw).__name__}")
    return int(float(hw.dram.size_GB) * 1e9)


def kv_capacity(spec: ModelSpec, policy: Policy, hw: HardwareSpec, cfg: SchedulerConfig,
                budget: int, plan: ParallelPlan = SINGLE) -> KvCapacity:
    total = device_bytes(hw)
    usable = int(total * cfg.gpu_memory_utilization)
    weights = device_weights_bytes(spec, policy, plan.tp, plan.pp)
    workspace = (peak_activation_bytes(rank_spec(spec, plan.tp), Workload(budget, 1, 1))
                 + (cfg.max_num_seqs - 1) * spec.vocab * FP16)
    per_token = device_kv_bytes_per_token(spec, policy.kv_bits, plan.tp, plan.pp, policy.kv_format)
    free = usable - weights - workspace
    if cfg.num_kv_blocks is not None:
        blocks = cfg.num_kv_blocks
    elif free < cfg.block_size * per_token:
        raise MpsimInputError(_no_fit(spec, policy, hw, cfg, plan, weights, workspace,
                                      cfg.block_size * per_token, usable, total))
    else:
        blocks = free // (cfg.block_size * per_token)
    return KvCapacity(total, usable, weights, workspace, per_token, cfg.block_size, int(blocks),
                      int(cfg.watermark * blocks), plan.devices)


def _no_fit(spec: ModelSpec, policy: Policy, hw: HardwareSpec, cfg: SchedulerConfig, plan: ParallelPlan,
            weights: int, workspace: int, block: int, usable: int, total: int) -> str:
    """The one error of a plan that does not fit: the memory it needs and what there is."""
    need = weights + workspace + block
    if plan.single:
        return (f"{spec.name} {policy} does not fit on {hw.name}: weights {weights / 1e9:.2f} GB + "
                f"activation workspace {workspace / 1e9:.2f} GB leave no room for one KV block in "
                f"{usable / 1e9:.2f} GB ({cfg.gpu_memory_utilization:g} of {total / 1e9:.1f} GB)")
    n = plan.devices
    return (f"{spec.name} {policy} does not fit on {n} x {hw.name} (tp {plan.tp} x pp {plan.pp}): "
            f"the most loaded device needs {need / 1e9:.2f} GB (weights {weights / 1e9:.2f} GB + "
            f"activation workspace {workspace / 1e9:.2f} GB + one KV block {block / 1e6:.2f} MB), "
            f"{n * need / 1e9:.1f} GB over the {n} devices, and has {usable / 1e9:.2f} GB "
            f"({cfg.gpu_memory_utilization:g} of {total / 1e9:.1f} GB; {n * usable / 1e9:.1f} GB over "
            f"the {n}); use more devices (--tp, --pp) or fewer weight bits")
