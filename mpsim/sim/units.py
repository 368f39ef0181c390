"""SimPy units that contend: pools of identical servers (DRAM channels, SMs, DMA engines) and memory.

A `TokenPool` is `tokens` identical servers; a request holds k of them for some cycles (a bundle of
CTAs spread over k SMs, a transfer striped over k channels). Requests are served strictly in arrival
order (simpy.Container's get queue is FIFO with head-of-line blocking), which fixes the order of
simultaneous events: same-time requests are served in the order their processes asked, and processes
are started in a fixed order, so a run is deterministic. Each unit counts its own busy time and bytes.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import simpy

Proc = Generator[Any, Any, None]


class TokenPool:
    """`tokens` identical servers; `hold(k, cycles)` occupies k of them for `cycles`."""

    def __init__(self, env: simpy.Environment, name: str, tokens: int) -> None:
        if tokens < 1:
            raise ValueError(f"{name}: a pool needs at least one server, got {tokens}")
        self.env, self.name, self.tokens = env, name, tokens
        self._free = simpy.Container(env, capacity=tokens, init=tokens)
        self.busy = 0.0  # server-cycles
        self.grants: list[tuple[float, int]] = []  # (time, k) of every grant, for order tests

    def hold(self, k: int, cycles: float) -> Proc:
        if cycles <= 0:
            return
        k = max(1, min(k, self.tokens))
        yield self._free.get(k)
        self.grants.append((self.env.now, k))
        yield self.env.timeout(cycles)
        yield self._free.put(k)
        self.busy += k * cycles

    def acquire(self, k: int) -> simpy.events.Event:
        """Take k servers (wait in FIFO order); pair with `release`."""
        return self._free.get(max(1, min(k, self.tokens)))

    def release(self, k: int, cycles: float) -> simpy.events.Event:
        """Give back k servers that were busy for `cycles`."""
        k = max(1, min(k, self.tokens))
        self.busy += k * cycles
        return self._free.put(k)

    def busy_fraction(self, elapsed: float) -> float:
        return self.busy / (self.tokens * elapsed) if elapsed > 0 else 0.0


class Memory:
    """A memory level with bandwidth (bytes/cycle over all channels) and latency (cycles).

    A transfer of B bytes is striped over min(channels, ceil(B / stripe)) channels, each moving
    bandwidth/channels bytes per cycle, so small transfers leave channels for others and large ones
    use them all. Latency is not held on a channel (requests pipeline); callers add it where a
    consumer waits for data (reads), not for posted writes.
    """

    def __init__(self, env: simpy.Environment, name: str, bytes_per_cycle: float, latency: float,
                 channels: int = 1, stripe_bytes: int = 256, write_cost: float = 1.0) -> None:
        if bytes_per_cycle <= 0:
            raise ValueError(f"{name}: bandwidth must be > 0 bytes/cycle, got {bytes_per_cycle}")
        self.name, self.latency, self.stripe = name, latency, stripe_bytes
        self.bytes_per_cycle = bytes_per_cycle
        self.write_cost = write_cost  # a written byte's time in read bytes (a write stream is slower)
        self.pool = TokenPool(env, name, channels)
        self.bytes = 0.0

    def transfer(self, nbytes: float, written: float = 0.0) -> Proc:
        """Move `nbytes` read and `written` written bytes (each taking `write_cost` read bytes' time)."""
        cost = nbytes + written * self.write_cost
        if cost <= 0:
            return
        channels = self.pool.tokens
        k = min(channels, max(1, math.ceil((nbytes + written) / self.stripe)))
        self.bytes += nbytes + written
        yield from self.pool.hold(k, cost * channels / (k * self.bytes_per_cycle))

    def busy_fraction(self, elapsed: float) -> float:
        return self.pool.busy_fraction(elapsed)
