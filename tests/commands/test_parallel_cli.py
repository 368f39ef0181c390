"""The parallel plan on the command line (issue 25): synth --tp/--pp, simulate of the trace, and
`op collective`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsim.cli import main


def test_synth_tp_then_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tp2.parquet"
    assert main(["synth", "--model", "mobilellama-1.4b", "--policy", "w4", "--prompt-len", "16",
                 "--gen-len", "2", "--tp", "2", "--pp", "2", "--out", str(out)]) == 0
    assert "tp 2 x pp 2" in capsys.readouterr().out
    assert main(["simulate", str(out), "--hw", "h100-sxm", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "allreduce" in text and "sendrecv" in text and "bound:" in text and "comm" in text
    assert "parallel plan: tp 2 x pp 2 (nccl all-reduce)" in text
    # rebuilt as vLLM's kernels: one rank's heads, the all-reduce by vLLM's custom kernels
    repriced = tmp_path / "vllm.parquet"
    assert main(["simulate", str(out), "--hw", "h100-sxm", "--no-cache", "--engine", "vllm", "--reprice",
                 "--reprice-out", str(repriced)]) == 0
    assert "parallel plan: tp 2 x pp 2" in capsys.readouterr().out
    from mpsim.traces.io import read_trace

    rows = read_trace(repriced).rows
    assert set(rows.loc[rows["op"] == "allreduce", "kernel"].astype(str)) == {"vllm_custom_allreduce"}
    assert set(rows.loc[rows["op"] == "attention", "num_q_heads"]) == {8}  # 16 heads over 2 ranks
    assert main(["synth", "--model", "llama-3-70b", "--policy", "w4", "--prompt-len", "16", "--gen-len", "2",
                 "--tp", "3", "--out", str(tmp_path / "bad.parquet")]) == 2
    assert "--tp 3 does not divide the 64 query heads of llama-3-70b" in capsys.readouterr().err


def test_op_collective_prices_each_library(capsys: pytest.CaptureFixture[str]) -> None:
    times = {}
    for lib in ("nccl", "vllm_custom", "trtllm_custom"):
        assert main(["op", "collective", "--tokens", "1", "--hidden", "8192", "--tp", "4",
                     "--library", lib, "--hw", "h100-sxm"]) == 0
        text = capsys.readouterr().out
        assert "allreduce of 16,384 bytes on 4 GPUs" in text and "bound     comm" in text
        times[lib] = float(text.split("time")[1].split("us")[0])
    assert times["trtllm_custom"] < times["nccl"] and times["vllm_custom"] < times["nccl"]
    assert main(["op", "collective", "--op", "allgather", "--tokens", "1", "--hidden", "8192",
                 "--tp", "2", "--library", "vllm_custom", "--hw", "h100-sxm"]) == 2
    assert "allgather runs on NCCL" in capsys.readouterr().err
