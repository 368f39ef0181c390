"""Absurd sizes are refused before anything is allocated or looped over (mpsim/limits.py): one error
naming the value, the limit and the variable that raises it; the variable moves the limit both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bad_input_cases import GENERIC_HEADER, clear_error, no_env_limits, tiny_config, write

from mpsim.cli import main


@pytest.fixture(autouse=True)
def default_limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context():
        no_env_limits()
        yield


def _serve(tmp_path: Path, *extra: str) -> list[str]:
    return ["serve", "--model", "tiny", "--policy", "fp16", "--hw", "h200-sxm", "--out",
            str(tmp_path / "serve"), "--prompt-len", "8", "--gen-len", "4", *extra]


def _spec(tmp_path: Path, workloads: object, policies: list[str] | None = None) -> str:
    spec = {"name": "big", "models": ["tiny"], "policies": policies or ["fp16"], "hardware": ["h200-sxm"],
            "workloads": workloads, "perf_models": ["roofline"]}
    return write(tmp_path / "spec.yaml", yaml.safe_dump(spec, default_flow_style=True))


SIZE_CASES = {
    "serve --requests 10^9": (lambda d: _serve(d, "--rate", "1", "--requests", "1000000000"),
                              "--requests: 1,000,000,000 requests exceeds the limit of 1,000,000",
                              "MPSIM_MAX_REQUESTS"),
    "serve --rate x --duration": (lambda d: _serve(d, "--rate", "1e6", "--duration", "1e6"),
                                  "requests exceeds the limit", "MPSIM_MAX_REQUESTS"),
    "sweep grid of 10^8": (lambda d: ["sweep", _spec(d, {"prompt_len": list(range(1, 10_001)),
                                                         "gen_len": list(range(1, 10_001))}),
                                      "--out", str(d / "sweep")],
                           "workloads: 100,000,000 points exceeds the limit of 100,000",
                           "MPSIM_MAX_SWEEP_POINTS"),
    "config.json with 10^6 layers": (lambda d: ["synth", "--model", str(tiny_config(
        d / "m", num_hidden_layers=10**6)), "--policy", "fp16", "--prompt-len", "4", "--gen-len", "2",
        "--out", str(d / "t.parquet")], "num_hidden_layers: 1,000,000 layers exceeds the limit of 1,000",
        "MPSIM_MAX_LAYERS"),
    "config.json hidden_size 10^9": (lambda d: ["synth", "--model", str(tiny_config(
        d / "m", hidden_size=10**9, head_dim=64)), "--policy", "fp16", "--prompt-len", "4", "--gen-len",
        "2", "--out", str(d / "t.parquet")], "hidden_size: 1,000,000,000 elements exceeds",
        "MPSIM_MAX_SHAPE_DIM"),
    "measured row with m = 1e11": (lambda d: ["validate", "--against", write(
        d / "m.csv", GENERIC_HEADER + "gemm,100000000000,4096,4096,fp16,16,,10.0,kernel\n"),
        "--hw", "h200-sxm"], "row 1, column 'm': 100,000,000,000 elements exceeds the limit of 16,777,216",
        "MPSIM_MAX_SHAPE_DIM"),
    "op gemm --m 1e11": (lambda d: ["op", "gemm", "--m", "100000000000", "--n", "64", "--k", "64", "--hw",
                                    "h200-sxm"], "gemm: m: 100,000,000,000 elements exceeds",
                         "MPSIM_MAX_SHAPE_DIM"),
    "op gemm grid of 2^34 blocks": (lambda d: ["op", "gemm", "--m", "16777216", "--n", "16777216", "--k",
                                               "64", "--hw", "h200-sxm"], "thread blocks exceeds the limit",
                                    "MPSIM_MAX_GRID_CTAS"),
    "op attention kv_len 10^11": (lambda d: ["op", "attention", "--batch", "1", "--q-len", "1", "--kv-len",
                                             "100000000000", "--heads", "4", "--kv-heads", "2",
                                             "--head-dim", "64", "--hw", "h200-sxm"],
                                  "kv_len: 100,000,000,000 elements exceeds", "MPSIM_MAX_SHAPE_DIM"),
}


@pytest.mark.parametrize("case", SIZE_CASES)
def test_a_size_past_its_limit_is_refused_up_front(case: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv, needle, variable = SIZE_CASES[case]
    clear_error(argv(tmp_path), capsys, needle, f"set {variable} to raise it")
    assert not (tmp_path / "serve").exists() and not (tmp_path / "sweep").exists()


def test_the_variable_moves_a_limit_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    args = ["op", "gemm", "--m", "4096", "--n", "64", "--k", "64", "--hw", "h200-sxm", "--perf-model",
            "roofline"]
    monkeypatch.setenv("MPSIM_MAX_SHAPE_DIM", "1024")
    clear_error(args, capsys, "gemm: m: 4,096 elements exceeds the limit of 1,024")
    monkeypatch.setenv("MPSIM_MAX_SHAPE_DIM", "100000")
    assert main(args) == 0
    monkeypatch.setenv("MPSIM_MAX_SHAPE_DIM", "lots")
    clear_error(args, capsys, "MPSIM_MAX_SHAPE_DIM='lots': expected a whole number >= 1")


def test_an_arrivals_csv_past_the_request_limit_names_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MPSIM_MAX_REQUESTS", "3")
    path = write(tmp_path / "arrivals.csv", "arrival_s,prompt_len,gen_len\n"
                 + "".join(f"{i * 0.1},8,4\n" for i in range(4)))
    clear_error(_serve(tmp_path, "--arrivals", path), capsys, path, "4 requests exceeds the limit of 3")
    big = write(tmp_path / "big.csv", "arrival_s,prompt_len,gen_len\n0,8,99999999999999999999\n")
    clear_error(_serve(tmp_path, "--arrivals", big, "--allow-beyond-context"), capsys, big, "row 1",
                "gen_len", "exceeds the limit")
