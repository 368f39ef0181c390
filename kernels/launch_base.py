"""What every launch-config module builds on: the config record, integer helpers, the default SM count.

mpsim.kernels.launch_config re-exports all of it (use `lc.LaunchConfig`, `lc.cdiv`).
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_SMS = 132            # H100/H200 SXM (docs/sources.md#h100-sxm5-80gb); shape-only: synth == capture


@dataclass(frozen=True)
class LaunchConfig:
    kernel: str
    grid: tuple[int, ...]
    block_m: int | None
    block_n: int | None
    block_k: int | None
    num_warps: int
    num_stages: int
    split_k: int = 1
    group_m: int | None = None  # tiled GEMM only: row tiles per band of the grouped tile order
    # further integer settings of kernels that are not mpsim's (stream_k, kv_append, l2_warm, ...)
    extra: tuple[tuple[str, int], ...] = ()

    def config_dict(self) -> dict[str, int]:
        out = {"num_warps": self.num_warps, "num_stages": self.num_stages, "split_k": self.split_k}
        for key in ("block_m", "block_n", "block_k", "group_m"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out

    def name(self) -> str:
        """A short label: kernel and tile (what `mpsim op --config best` prints)."""
        parts = [f"{self.block_m}x{self.block_n}x{self.block_k}" if self.block_k else
                 f"{self.block_m}x{self.block_n}", f"w{self.num_warps}", f"s{self.num_stages}"]
        if self.split_k > 1:
            parts.append(f"split{self.split_k}")
        parts += [f"{k}{v}" for k, v in self.extra if v not in (0, None)]
        return f"{self.kernel}[{' '.join(parts)}]"

    @property
    def programs(self) -> int:
        total = 1
        for g in self.grid:
            total *= g
        return total


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())
