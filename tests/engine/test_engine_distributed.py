"""The tensor-parallel run's edges: the split of each weight, plans that do not divide, a world that
cannot start, ranks that fail or hang (the parent never waits on them forever)."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from engine_cases import SMALL, variant

from mpsim.engine.capture_tp import capture_tp
from mpsim.engine.distributed import DistributedError, RankJob, _stop, _wait, run_ranks
from mpsim.engine.quantize import stored_linear
from mpsim.engine.shard import column_rows, kv_heads_of_rank, shard_linear
from mpsim.engine.weights import Linear
from mpsim.errors import MpsimInputError
from mpsim.policy import parse_policy
from mpsim.reference.group_quant import dequantize_group
from mpsim.workload import Workload


def test_tp_not_dividing_the_heads_is_one_clear_error() -> None:
    with pytest.raises(MpsimInputError, match="--tp 3 does not divide the 4 query heads"):
        capture_tp(SMALL, parse_policy("fp16"), Workload(4, 2, 1), 3)


def test_kv_heads_split_or_replicated_as_vllm() -> None:
    assert [list(kv_heads_of_rank(variant(num_kv_heads=2), 2, r)) for r in range(2)] == [[0], [1]]
    assert [list(kv_heads_of_rank(variant(num_kv_heads=1), 2, r)) for r in range(2)] == [[0], [0]]
    rows = [column_rows("qkv", SMALL, 2, r) for r in range(2)]  # q 128, k 64, v 64 rows in all
    assert sorted(np.concatenate(rows).tolist()) == list(range(SMALL.q_dim + 2 * SMALL.kv_dim))
    assert rows[1][:2].tolist() == [64, 65] and rows[1][64] == SMALL.q_dim + 32


def test_group_weights_split_along_k_on_whole_groups() -> None:
    """A row-parallel shard of an int4 group-quantized weight dequantizes to the same columns of the
    full weight (quantized once at the full shape); the bias stays on rank 0 only."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, SMALL.ffn)) * 0.05).astype(np.float16)
    bias = rng.standard_normal(64).astype(np.float16)
    full = stored_linear(Linear(w, bias), parse_policy("w4g32"))
    whole = dequantize_group(full)
    for rank in range(2):
        part, b = shard_linear("down", full, bias, SMALL, 2, rank, 0)
        half = SMALL.ffn // 2
        np.testing.assert_array_equal(dequantize_group(part), whole[:, rank * half:(rank + 1) * half])
        assert b is not None and (b == (bias if rank == 0 else 0)).all()
    with pytest.raises(MpsimInputError, match="layer 0 down: K = 256 split into row-parallel shards of "
                       "128 columns cuts the 4-bit groups of 256"):
        shard_linear("down", stored_linear(Linear(w, None), parse_policy("w4g256")), None, SMALL, 2, 0, 0)


def test_hung_ranks_are_stopped_at_the_deadline_and_joined(tmp_path: Path) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=time.sleep, args=(300,)) for _ in range(2)]
    for p in procs:
        p.start()
    start = time.monotonic()
    with pytest.raises(DistributedError, match="did not finish within 1 s"):
        try:
            _wait(procs, 1.0, "torch.distributed gloo, rendezvous tcp://127.0.0.1:1", tmp_path)
        finally:
            _stop(procs)
    assert time.monotonic() - start < 60 and not any(p.is_alive() for p in procs)


def test_a_failed_rank_stops_the_others(tmp_path: Path) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=sys.exit, args=(3,)), ctx.Process(target=time.sleep, args=(300,))]
    for p in procs:
        p.start()
    with pytest.raises(DistributedError, match=r"rank 0 failed \(exit code 3\)"):
        try:
            _wait(procs, 120.0, "where", tmp_path)
        finally:
            _stop(procs)
    assert not any(p.is_alive() for p in procs) and procs[1].exitcode is not None


def test_a_world_that_cannot_start_names_backend_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 cannot host the rendezvous (the port is taken); rank 1 would wait for it: the parent
    reports rank 0's error with the backend and the address, and stops rank 1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr("mpsim.engine.distributed.free_port", lambda: port)
        job = RankJob(SMALL, "fp16", [[1, 2, 3]], 2, 2, None, timeout_s=60)
        with pytest.raises(DistributedError, match=rf"(?s)torch.distributed gloo, rendezvous "
                           rf"tcp://127.0.0.1:{port}: rank 0 failed.*could not start"):
            run_ranks(job)


@pytest.mark.slow
def test_generate_tp2_prints_the_tp1_text(capsys: pytest.CaptureFixture[str]) -> None:
    """`mpsim generate --tp 2` on the tiny model (numba references on two ranks) prints TP 1's text
    (a difference would have to be a near-tie; none occurs on this prompt)."""
    from mpsim.cli import main

    args = ["generate", "--prompt", "import os", "--gen-len", "8"]
    assert main(args) == 0
    one = capsys.readouterr().out
    assert main([*args, "--tp", "2"]) == 0
    assert capsys.readouterr().out == one and one.startswith("import os")


@pytest.mark.parametrize(("args", "message"), [
    (["capture", "--model", "tiny", "--tp", "3"], "--tp 3 does not divide the 4 query heads of mpsim-tiny"),
    (["capture", "--model", "tiny", "--tp", "0"], "--tp 0: expected a whole number >= 1"),
    (["capture", "--model", "tiny", "--tp", "2", "--decode", "graphs"], "ranks decode eagerly"),
    (["generate", "--prompt", "x", "--tp", "3"], "--tp 3 does not divide the 4 query heads"),
])
def test_cli_tp_errors_come_before_any_process(args: list[str], message: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from mpsim.cli import main

    out = (["--policy", "w4", "--prompt-len", "4", "--gen-len", "2", "--out", str(tmp_path / "t.parquet")]
           if args[0] == "capture" else [])
    assert main([*args, *out]) == 2
    assert message in capsys.readouterr().err
