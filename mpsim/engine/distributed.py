"""A tensor-parallel run of the engine in `tp` processes (docs/parallelism.md, "Distributed capture").

The parent spawns one process per rank (torch.multiprocessing, spawn start method). Each joins a
torch.distributed group (gloo over the loopback interface on CPUs, NCCL on CUDA devices; rendezvous
at tcp://127.0.0.1 on a free port), builds its shard of the model (mpsim/engine/shard.py) and
generates greedily on mpsim's kernels, calling a real all_reduce after the vocab-parallel embedding
and each row-parallel GEMM and a real all_gather of the lm_head's logits, where mpsim/parallel.py
puts them. Every rank records its launches and collectives; each writes its result to a file the
parent reads. The parent waits with a deadline: a rank that fails or outlives it stops the run (the
others are terminated and every process joined) with one error naming the backend, the rendezvous
and the rank's own error.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from mpsim.errors import MpsimInputError
from mpsim.library.collectives import NCCL_KERNELS, collective_row
from mpsim.models import ModelSpec
from mpsim.parallel import vocab_shard
from mpsim.traces.recorder import active_recorder

DEFAULT_TIMEOUT_S = 600.0  # the whole run, spawn to results: an assumption sized for CPU runs
SPAWN_GRACE_S = 10.0  # how long a terminated rank gets to exit before it is killed


class DistributedError(RuntimeError):
    """A tensor-parallel run that could not start or did not finish (names backend and rendezvous)."""


@dataclass(frozen=True)
class RankJob:
    """What every rank runs: the model (`weights`: an HF folder; None: random weights from `seed`),
    the policy, the prompts and new tokens, and whether to record a trace (after a warm-up)."""

    spec: ModelSpec
    policy: str
    prompts: list[list[int]]
    gen_len: int
    tp: int
    weights: str | None
    seed: int = 0
    backend: str = "triton"
    record: bool = True
    eos: tuple[int, ...] = ()
    allreduce_kernel: str = NCCL_KERNELS["allreduce"]
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class RankResult:
    rank: int
    tokens: list[list[int]]
    rows: list[dict[str, Any]]
    wall_s: float


class RankComm:
    """One rank's collectives (mpsim.engine.model.TensorParallel), each recorded as a trace row
    (mpsim.library.collectives.collective_row: msg_bytes, comm_library) with its host wall time."""

    def __init__(self, rank: int, tp: int, vocab: int, allreduce_kernel: str) -> None:
        self.rank, self.tp, self.vocab = rank, tp, vocab
        self.shard = vocab_shard(vocab, tp)
        self.allreduce_kernel = allreduce_kernel

    def local_ids(self, ids: torch.Tensor) -> torch.Tensor:
        local = ids - self.rank * self.shard
        outside = (local < 0) | (local >= self.shard)
        return torch.where(outside, torch.full_like(local, self.shard), local)  # the zero row

    def _launch(self, op: str, kernel: str, m: int, n: int) -> Any:
        import contextlib

        rec = active_recorder()
        if rec is None:
            return contextlib.nullcontext()
        row = collective_row(op, kernel, m, n, self.tp, "", -1, 0)
        own = ("op", "kernel", "grid", "config", "module", "layer")  # module, layer: the scope's
        extra = {k: v for k, v in row.items() if k not in own}
        return rec.launch(kernel=kernel, op=op, grid=tuple(row["grid"]), config=row["config"], **extra)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        x = x.contiguous()
        with self._launch("allreduce", self.allreduce_kernel, x.shape[0], x.shape[-1]):
            dist.all_reduce(x)
        return x

    def gather_logits(self, logits: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        logits = logits.contiguous()
        parts = [torch.empty_like(logits) for _ in range(self.tp)]
        with self._launch("allgather", NCCL_KERNELS["allgather"], logits.shape[0], self.shard * self.tp):
            dist.all_gather(parts, logits)
        return torch.cat(parts, dim=1)[:, : self.vocab].contiguous()


def comm_backend() -> str:
    """NCCL when the ranks' tensors are on CUDA devices, else gloo."""
    from mpsim.kernels.runtime import on_gpu

    return "nccl" if on_gpu() else "gloo"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loopback_interface() -> str:
    """The loopback interface's name (gloo's GLOO_SOCKET_IFNAME: the ranks talk over it only)."""
    for _, name in socket.if_nameindex():
        if name.startswith("lo"):
            return name
    raise DistributedError("no loopback network interface (lo*) found for gloo; the ranks of a CPU "
                           "tensor-parallel run talk over loopback only")


def run_ranks(job: RankJob) -> list[RankResult]:
    """Run `job` on job.tp ranks; the results in rank order. One DistributedError if the group
    cannot start, a rank fails, or the run outlives job.timeout_s (every process is joined)."""
    import torch.multiprocessing as mp

    backend = comm_backend()
    if backend == "nccl" and torch.cuda.device_count() < job.tp:
        raise MpsimInputError(f"--tp {job.tp}: NCCL needs one CUDA device per rank; "
                              f"{torch.cuda.device_count()} visible")
    init = f"tcp://127.0.0.1:{free_port()}"
    where = f"torch.distributed {backend}, rendezvous {init}"
    ctx = mp.get_context("spawn")
    saved = os.environ.get("GLOO_SOCKET_IFNAME")
    with tempfile.TemporaryDirectory(prefix="mpsim-tp-") as tmp:
        if backend == "gloo":
            os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()  # inherited by the spawned ranks
        try:
            procs = [ctx.Process(target=rank_main, args=(r, job, init, backend, tmp),
                                 name=f"mpsim-tp-rank{r}") for r in range(job.tp)]
            for p in procs:
                p.start()
        finally:
            if saved is None:
                os.environ.pop("GLOO_SOCKET_IFNAME", None)
            else:
                os.environ["GLOO_SOCKET_IFNAME"] = saved
        try:
            _wait(procs, job.timeout_s, where, Path(tmp))
        finally:
            _stop(procs)
        return [_result(Path(tmp), r, where) for r in range(job.tp)]


def _wait(procs: list[Any], timeout_s: float, where: str, tmp: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while any(p.is_alive() for p in procs):
        for r, p in enumerate(procs):
            if p.exitcode not in (None, 0):
                raise DistributedError(f"{where}: rank {r} failed (exit code {p.exitcode}):\n"
                                       + _error_text(tmp, r))
        if time.monotonic() > deadline:
            raise DistributedError(f"{where}: the {len(procs)} ranks did not finish within {timeout_s:.0f} s "
                                   "(stopped)")
        time.sleep(0.05)
    for r, p in enumerate(procs):
        if p.exitcode != 0:
            raise DistributedError(f"{where}: rank {r} failed (exit code {p.exitcode}):\n"
                                   + _error_text(tmp, r))


def _stop(procs: list[Any]) -> None:
    """Terminate the ranks still running, kill those that ignore it, join all."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(SPAWN_GRACE_S)
        if p.is_alive():
            p.kill()
            p.join()


def _error_text(tmp: Path, rank: int) -> str:
    path = tmp / f"rank{rank}.err"
    return path.read_text() if path.exists() else "(no error written: the process died)"


def _result(tmp: Path, rank: int, where: str) -> RankResult:
    path = tmp / f"rank{rank}.pkl"
    if not path.exists():
        raise DistributedError(f"{where}: rank {rank} exited without a result")
    with path.open("rb") as f:  # written by this run's own rank process, in this run's private folder
        got = pickle.load(f)
    assert isinstance(got, RankResult)
    return got


def rank_main(rank: int, job: RankJob, init: str, backend: str, tmp: str) -> None:
    """One rank's process: join the group, build the shard, generate (recorded), write the result."""
    import sys

    import torch.distributed as dist

    try:
        try:
            dist.init_process_group(backend, init_method=init, rank=rank, world_size=job.tp,
                                    timeout=timedelta(seconds=job.timeout_s))
        except Exception as e:
            raise DistributedError(f"rank {rank}: torch.distributed {backend} could not start at {init}"
                                   f" (world size {job.tp}): {e}") from e
        if backend == "nccl":
            torch.cuda.set_device(rank)
        result = _generate_rank(rank, job)
        out = Path(tmp) / f"rank{rank}.pkl"
        with (Path(tmp) / f"rank{rank}.tmp").open("wb") as f:
            pickle.dump(result, f)
        (Path(tmp) / f"rank{rank}.tmp").rename(out)
    except BaseException as e:  # a known error as its message; anything else with its traceback
        known = isinstance(e, DistributedError | MpsimInputError)
        (Path(tmp) / f"rank{rank}.err").write_text(f"{type(e).__name__}: {e}" if known
                                                   else traceback.format_exc())
        sys.exit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _generate_rank(rank: int, job: RankJob) -> RankResult:
    from mpsim.engine.backends import make_backend
    from mpsim.engine.capture import environment
    from mpsim.engine.generate import generate
    from mpsim.engine.scheduler import FixedScheduler
    from mpsim.engine.shard import rank_decoder
    from mpsim.engine.weights import dummy_weights, load_hf_weights
    from mpsim.kernels.runtime import on_gpu
    from mpsim.policy import parse_policy
    from mpsim.traces.recorder import Recorder

    policy = parse_policy(job.policy)
    params = (load_hf_weights(job.weights, job.spec) if job.weights is not None
              else dummy_weights(job.spec, job.seed))
    decoder = rank_decoder(params, policy, make_backend(job.backend), job.tp, rank,
                           dummy_seed=None if job.weights is not None else job.seed)
    decoder.tp = RankComm(rank, job.tp, job.spec.vocab, job.allreduce_kernel)
    eos = job.eos or None
    if not job.record:
        start = time.perf_counter()
        out = generate(decoder, job.prompts, job.gen_len, FixedScheduler(policy), eos=eos)
        return RankResult(rank, out.tokens, [], time.perf_counter() - start)
    # warm-up, unrecorded: JIT compilation (capture's own, mpsim/engine/capture.py)
    generate(decoder, [p[: min(8, len(p))] for p in job.prompts], 2, FixedScheduler(policy), eos=eos)
    gpu = on_gpu()
    if gpu:
        torch.cuda.synchronize()
    with Recorder(use_cuda_events=gpu, device_name=environment("triton", gpu)["device"]) as rec:
        start = time.perf_counter()
        out = generate(decoder, job.prompts, job.gen_len, FixedScheduler(policy), eos=eos)
        if gpu:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    return RankResult(rank, out.tokens, rec.finish(), wall)
