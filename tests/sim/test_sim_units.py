"""SimPy units: the fixed order of simultaneous requests, channel striping, coarsening bookkeeping."""

from __future__ import annotations

from collections import Counter

import pytest
import simpy

from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.work import Epilogue, KernelWork, Trip, bundles
from mpsim.sim.params import SimParams
from mpsim.sim.units import Memory, Proc, TokenPool


def _run_users(order: list[tuple[str, int, float]]) -> tuple[dict[str, float], list[tuple[float, int]]]:
    """Start users in the given order at time 0; each holds k servers of a 2-server pool."""
    env = simpy.Environment()
    pool = TokenPool(env, "pool", 2)
    done: dict[str, float] = {}

    def user(name: str, k: int, cycles: float) -> Proc:
        yield from pool.hold(k, cycles)
        done[name] = env.now

    for name, k, cycles in order:
        env.process(user(name, k, cycles))
    env.run()
    return done, pool.grants


def test_simultaneous_requests_are_served_in_process_start_order() -> None:
    done, grants = _run_users([("a", 2, 5), ("b", 1, 3), ("c", 1, 1), ("d", 2, 1), ("e", 1, 1)])
    # a takes both servers; b and c get one each when a ends; d needs both and waits for b;
    # e (one server) waits behind d although a server is free at 6: first come, first served.
    assert done == {"a": 5, "c": 6, "b": 8, "d": 9, "e": 10}
    assert grants == [(0, 2), (5, 1), (5, 1), (8, 2), (9, 1)]


def test_the_order_follows_start_order_not_names() -> None:
    first, _ = _run_users([("x", 1, 4), ("y", 1, 2), ("z", 2, 1)])
    swapped, _ = _run_users([("y", 1, 2), ("x", 1, 4), ("z", 2, 1)])
    assert first == swapped == {"x": 4, "y": 2, "z": 5}
    late, _ = _run_users([("z", 2, 1), ("x", 1, 4), ("y", 1, 2)])
    assert late == {"z": 1, "x": 5, "y": 3}


def test_memory_stripes_transfers_over_channels() -> None:
    env = simpy.Environment()
    mem = Memory(env, "dram", bytes_per_cycle=96.0, latency=0.0, channels=96, stripe_bytes=256)
    ends: list[float] = []

    def move(nbytes: float) -> Proc:
        yield from mem.transfer(nbytes)
        ends.append(env.now)

    env.process(move(256))          # one channel at 1 B/cycle: 256 cycles
    env.process(move(256))          # a second channel, in parallel
    env.process(move(94 * 256))     # the 94 other channels: 256 cycles too
    env.run()
    assert ends == [256, 256, 256]
    assert mem.bytes == 96 * 256
    assert mem.busy_fraction(256) == 1.0


def _work(iters: tuple[int, ...], layout: str, inner: int, total: int) -> KernelWork:
    trip = Trip(1024.0, 1e6, serial=False)
    return KernelWork(trip, Epilogue(64.0), iters, layout, inner, total,
                      CtaResources(4, 0.0, 0.0, 2, 64), dram_read_bytes=0.0)


def test_class_layouts_count_ctas() -> None:
    inner = _work((1, 2, 3), "inner", 1, 10)
    assert inner.class_of_range(0, 10) == Counter({0: 4, 1: 3, 2: 3})
    assert inner.class_of_range(4, 8) == Counter({1: 2, 2: 1, 0: 1})
    outer = _work((5, 5, 2), "outer", 4, 12)
    assert outer.class_of_range(2, 9) == Counter({0: 2, 1: 4, 2: 1})


def test_bundles_keep_every_trip() -> None:
    p = SimParams(gpu_max_iters=8, max_waves=2, max_classes=3, max_resident_split=2)
    # 16 classes of 2..32 trips interleaved (causal prefill), 200 CTAs, 64 slots (2 per SM).
    work = _work(tuple(2 * (i + 1) for i in range(16)), "inner", 1, 200)
    plan = bundles(work, 64, 32, p)
    trips = sum(b.count * b.trips for b in plan)
    exact = sum(n * work.iters_by_class[c] for c, n in work.class_of_range(0, 200).items())
    assert exact <= trips <= exact * 1.1  # merged classes round their mean trips up
    assert all(b.iters <= p.gpu_max_iters for b in plan)
    assert all(b.count <= 32 for b in plan)  # co-resident CTAs split into one-per-SM processes
    assert sum(b.count * b.repeat for b in plan) == 200
    # simulated trips stand for every real trip: first and last single, the rest scaled
    for b in plan:
        assert sum(b.trip_scale(i) for i in range(b.iters)) == pytest.approx(b.trips)
    uniform = _work((40,), "single", 200, 1000)
    plan = bundles(uniform, 64, 64, p)
    assert sum(b.count * b.trips for b in plan) == 1000 * 40
    assert sum(b.count * b.repeat for b in plan) == 1000
