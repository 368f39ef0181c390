"""The Dask path: a small sweep on a real LocalCluster gives the same table as local processes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.sweep.run import NO_FIXED_PORT, run_sweep
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.analysis.sweep.store import PointStore
from mpsim.cli import main
from mpsim.errors import MpsimInputError

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed")

SPEC = """
name: dasky
models: [mobilellama-1.4b]
policies: [fp16, w4, ap4-3]
hardware: [h200-sxm, npu-llm]
workloads: [{prompt_len: 24, gen_len: 5, batch: 2}]
perf_models: [roofline]
"""


def test_dask_table_equals_the_local_one(tmp_path: Path) -> None:
    local = run_sweep(parse_spec(SPEC), tmp_path / "local", workers=1, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None, scheduler_kwargs=NO_FIXED_PORT) as cluster:
        remote = run_sweep(parse_spec(SPEC), tmp_path / "dask", dask_address=cluster.scheduler_address,
                           progress=False)
    assert remote.computed == 6
    pd.testing.assert_frame_equal(remote.table, local.table)
    assert sorted(PointStore(tmp_path / "dask").computed_keys()) == sorted(parse_spec(SPEC).keys())


def test_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MpsimInputError, match="cannot connect to the Dask scheduler"):
        run_sweep(parse_spec(SPEC), tmp_path, dask_address="tcp://127.0.0.1:9", progress=False,
                  dask_timeout_s=1.0)


@pytest.mark.parametrize("address", ["localhost", "local:", "tcp//host:8786", "host:port"])
def test_malformed_address_is_one_clear_error_before_any_work(tmp_path: Path, address: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--dask", address]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--dask {address!r}: expected 'local'" in err[0], err
    assert not (tmp_path / "o").exists()


def test_dask_local_starts_a_local_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--dask", "local", "--workers", "1",
                 "--no-progress"]) == 0
    assert "6 points (6 computed now" in capsys.readouterr().out
    local = run_sweep(parse_spec(SPEC), tmp_path / "local", workers=1, progress=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "o" / "results.parquet"), local.table)


SERVE = """
name: dasky-serve
models: [mobilellama-1.4b]
policies: [fp16, w4+kv8]
hardware: [h200-sxm]
serve: {rates: [100, 400], requests: 20, prompt_len: 64, gen_len: 8, perf_model: roofline}
"""


def test_serve_points_run_on_dask_too(tmp_path: Path) -> None:
    from mpsim.analysis.sweep.serve import COLUMNS

    local = run_sweep(parse_spec(SERVE), tmp_path / "local", workers=1, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None, scheduler_kwargs=NO_FIXED_PORT) as cluster:
        remote = run_sweep(parse_spec(SERVE), tmp_path / "dask", dask_address=cluster.scheduler_address,
                           progress=False)
    assert remote.computed == 4 and remote.serve_table is not None and local.serve_table is not None
    same = [c for c in COLUMNS if c != "wall_s"]
    pd.testing.assert_frame_equal(remote.serve_table[same], local.serve_table[same])


def test_two_local_clusters_at_once_do_not_share_a_port() -> None:
    """Without a dashboard a LocalCluster still serves HTTP on distributed's default port 8787: two
    at once (the two xdist workers' Dask tests) warned "Port 8787 is already in use"; NO_FIXED_PORT
    gives each scheduler a free one."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kwargs = {"n_workers": 1, "threads_per_worker": 1, "processes": False,
                  "dashboard_address": None, "scheduler_kwargs": NO_FIXED_PORT}
        with distributed.LocalCluster(**kwargs) as a, distributed.LocalCluster(**kwargs) as b:
            assert a.scheduler.http_server.port != b.scheduler.http_server.port
