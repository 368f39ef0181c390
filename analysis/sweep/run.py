"""Running a sweep: skip finished points, farm groups out, show progress, merge the table.

Three executors with one contract (yield each task as it finishes): the calling process (1 worker),
local processes (concurrent.futures), or a Dask distributed cluster (`dask_address`). Workers save
their own points (sweep/point.py), so the table is the same whichever ran them and however often the
sweep was interrupted.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import pandas as pd
import yaml
from tqdm import tqdm

from mpsim.analysis.sweep import default_workers, serve
from mpsim.analysis.sweep.lock import worker_init
from mpsim.analysis.sweep.point import GroupTask, run_group
from mpsim.analysis.sweep.spec import SweepSpec
from mpsim.analysis.sweep.store import DiscardedPointsError, PointStore
from mpsim.analysis.sweep.support import check_support
from mpsim.errors import MpsimInputError
from mpsim.traces.atomic import write_text_atomic
from mpsim.traces.schema import DEFAULT_ENGINE


@dataclass(frozen=True)
class SweepOutcome:
    table: pd.DataFrame
    computed: int  # points computed by this run
    skipped: int   # points already finished before it
    seconds: float
    path: Path
    serve_table: pd.DataFrame | None = None  # the serve section's points (serve_results.parquet)
    serve_path: Path | None = None


Task: TypeAlias = GroupTask | serve.ServeTask


LOCAL_DASK = "local"  # --dask local: a LocalCluster on this machine, as Dask users expect
# a LocalCluster without a dashboard still serves HTTP (health, metrics) on distributed's default
# port 8787 (distributed/scheduler.py start_http_server default_port), so two clusters on one
# machine collide ("Port 8787 is already in use"); its scheduler takes any free port instead
NO_FIXED_PORT = {"dashboard_address": ":0"}
DASK_ADDRESS = re.compile(r"^([a-z][a-z0-9+]*://\S+|[\w.\-\[\]:]+:\d+)$")


def check_dask_address(address: str) -> str:
    """'local' or a scheduler address (tcp://host:port, host:port); else one clear error."""
    if address != LOCAL_DASK and not DASK_ADDRESS.match(address):
        raise MpsimInputError(f"--dask {address!r}: expected 'local' (a LocalCluster on this machine) "
                              "or a scheduler address such as tcp://host:8786")
    return address


def run_sweep(spec: SweepSpec, out_dir: str | Path, *, workers: int | None = None,
              dask_address: str | None = None, progress: bool = True,
              dask_timeout_s: float = 20.0) -> SweepOutcome:
    """Run every unfinished point of `spec` into `out_dir` and merge DIR/results.parquet."""
    n = default_workers() if workers is None else workers
    if n < 1:
        raise MpsimInputError(f"--workers must be >= 1, got {n}")
    if dask_address is not None:
        check_dask_address(dask_address)
    check_support(spec)  # a policy a device cannot run is the spec's error before any point runs
    store, serve_store = PointStore(out_dir), PointStore(out_dir, serve.POINTS)
    t0 = time.perf_counter()
    with store.locked() as lock_fd:
        store.remove_partial()
        serve_store.remove_partial()
        _write_spec_copy(spec, store.root / "spec.yaml")
        serve_keys = serve.keys(spec) if spec.serve is not None else []
        total, computed = len(spec) + len(serve_keys), 0
        for attempt in (1, 2):  # a second pass recomputes point files discarded while merging
            tasks: list[Task] = []
            if spec.serve is not None:  # the long ones first
                tasks += serve.tasks(spec, serve_store.finished(), str(store.root))
            tasks += pending_tasks(spec, store)
            todo = sum(t.size for t in tasks)
            computed += todo
            with tqdm(total=total, initial=total - todo, unit="point", desc=f"sweep {spec.name}",
                      disable=not progress, dynamic_ncols=True) as bar:
                for task in _execute(tasks, n, dask_address, dask_timeout_s, (lock_fd, store.lock)):
                    bar.update(task.size)
            try:
                table = store.merge(spec.keys()) if len(spec) else pd.DataFrame()
                serve_table = serve.merge(store.root, serve_keys) if serve_keys else None
                break
            except DiscardedPointsError:
                if attempt == 2:
                    raise
    return SweepOutcome(table, computed, total - computed, time.perf_counter() - t0, store.results,
                        serve_table, store.root / serve.RESULTS if serve_keys else None)


def run_task(task: Task) -> list[str]:
    """Run one task of either kind in this process (what every executor calls)."""
    if isinstance(task, serve.ServeTask):
        return serve.run_serve_task(task)
    return run_group(task)


def pending_tasks(spec: SweepSpec, store: PointStore) -> list[GroupTask]:
    """One task per group that still has unfinished points, holding only those points."""
    done = store.finished()
    tasks = []
    for g in spec.groups():
        todo = tuple(p for p in g.points if p.key not in done)
        if todo:
            hardware = {p.hw: spec.hardware[p.hw] for p in todo}
            tasks.append(GroupTask(dataclasses.replace(g, points=todo), hardware, str(store.root)))
    return tasks


def _execute(tasks: Sequence[Task], workers: int, dask_address: str | None,
             dask_timeout_s: float, lock: tuple[int, Path] | None = None) -> Iterator[Task]:
    if not tasks:
        return iter(())
    if dask_address is not None:
        return _on_dask(tasks, dask_address, dask_timeout_s, workers)
    if workers == 1 or len(tasks) <= 1:
        return _in_process(tasks)
    return _on_processes(tasks, workers, lock)


def _in_process(tasks: Sequence[Task]) -> Iterator[Task]:
    for task in tasks:
        run_task(task)
        yield task


def _on_processes(tasks: Sequence[Task], workers: int, lock: tuple[int, Path] | None) -> Iterator[Task]:
    """On local worker processes, which let go of the folder's lock (its descriptor and path) and
    die with this process."""
    fd, path = (None, None) if lock is None else (lock[0], str(lock[1]))
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), initializer=worker_init,
                               initargs=(fd, path, os.getpid()))
    pending: dict[Future[list[str]], Task] = {pool.submit(run_task, t): t for t in tasks}
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                fut.result()  # a worker's exception stops the sweep; saved points stay saved
                yield pending.pop(fut)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _on_dask(tasks: Sequence[Task], address: str, timeout_s: float,
             workers: int) -> Iterator[Task]:
    """On the scheduler at `address`, or on a LocalCluster of `workers` processes for "local"."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise MpsimInputError("--dask needs dask[distributed]: pip install 'mpsim[cluster]'") from None
    cluster = None
    if address == LOCAL_DASK:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, scheduler_kwargs=NO_FIXED_PORT)
        client = Client(cluster)  # its worker processes die with this one (distributed's
        # AsyncProcess exits a child when its parent's pipe closes: tests/analysis/sweep/test_sweep_faults.py)
    else:
        client = _connect(Client, address, timeout_s)
    try:
        with client:
            futures = {client.submit(run_task, t, pure=False): t for t in tasks}
            for fut in as_completed(list(futures)):
                fut.result()
                yield futures[fut]
    finally:
        if cluster is not None:
            cluster.close()


def _connect(client_cls: Any, address: str, timeout_s: float) -> Any:
    """A client of the scheduler at `address`; a malformed or unreachable one is one clear error."""
    try:
        return client_cls(address, timeout=f"{timeout_s}s")
    except ValueError as exc:
        raise MpsimInputError(f"--dask {address!r}: not a scheduler address ({exc}); expected "
                              "'local' or e.g. tcp://host:8786") from None
    except (OSError, TimeoutError) as exc:
        raise MpsimInputError(f"cannot connect to the Dask scheduler at {address!r}: {exc}") from None


def _write_spec_copy(spec: SweepSpec, path: Path) -> None:
    """The spec as names, next to its points: what the folder holds, for people reading it later."""
    data: dict[str, Any] = {
        "name": spec.name,
        "models": [m.name for m in spec.models],
        "policies": list(spec.policies),
        "hardware": list(spec.hardware),
        "workloads": [w.as_dict() for w in spec.workloads],
        "perf_models": list(spec.perf_models),
    }
    if spec.engines != (DEFAULT_ENGINE,):
        data["engines"] = list(spec.engines)
    if spec.quant_method is not None:
        data["quant_method"] = spec.quant_method
    if spec.plans != ((1, 1),):
        data["tp"] = list(dict.fromkeys(tp for tp, _ in spec.plans))
        data["pp"] = list(dict.fromkeys(pp for _, pp in spec.plans))
    if spec.micro_batches != (1,):
        data["micro_batches"] = list(spec.micro_batches)
    if spec.exclude:
        data["exclude"] = [e.as_dict() for e in spec.exclude]
    if spec.serve is not None:
        data["serve"] = serve.spec_copy(spec.serve)
    write_text_atomic(f"# the spec last run in this folder (from {spec.source})\n"
                      + yaml.safe_dump(data, sort_keys=False), path)
