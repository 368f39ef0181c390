"""Calibration refuses what it cannot fit and says when the timings are not a GPU's: a fit on one row
(once 0.00% error, written), on no usable row (once NaN, written), `--fit-rows 0` (once accepted),
too few distinct launches in a trace; a CPU-interpreter capture calibrated as H200 warns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.cli import main
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.io import write_trace
from mpsim.workload import Workload

HEADER = ("op,m,n,k,w_format,w_bits,group_size,batch,q_len,kv_len,heads,kv_heads,head_dim,kv_bits,"
          "tokens,hidden,measured_us,protocol,includes")
ONE_ROW = "gemm,1,4096,4096,fp16,16,,,,,,,,,,,14.1,graph,"
UNPREDICTABLE = "attention,,,,,,,1,1,1024,32,8,128,2,,,12.0,graph,"  # 2-bit KV: no kernel


def _table(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def _trace(tmp_path: Path, launches: int | None, device: str) -> Path:
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("fp16"), Workload(16, 2, 1))
    rows = tr.rows if launches is None else tr.rows.iloc[:launches].reset_index(drop=True)
    rows["measured_us"] = pd.array(np.random.default_rng(0).uniform(2, 30, len(rows)), dtype="Float64")
    rows["device"] = pd.array([device] * len(rows), dtype="string")
    tr = type(tr)(rows, tr.meta)
    path = tmp_path / "t.parquet"
    write_trace(tr, path)
    return path


@pytest.mark.parametrize(("case", "args", "message"), [
    ("one row", ["--against", ONE_ROW], "at least as many predicted rows as constants"),
    ("no usable row", ["--against", UNPREDICTABLE], "none of the 1 rows can be predicted"),
    ("fit rows 0", ["--against", ONE_ROW, "--fit-rows", "0"], "--fit-rows 0"),
    ("test rows -1", ["--against", ONE_ROW, "--test-rows", "-1"], "--test-rows -1"),
    ("two launches", ["trace", 2], "at least 3 distinct measured launches"),
])
def test_calibration_refuses_what_it_cannot_fit(case: str, args: list, message: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.yaml"
    if args[0] == "trace":
        argv = [str(_trace(tmp_path, args[1], "NVIDIA H200"))]
    else:
        argv = ["--against", str(_table(tmp_path, args[1])), *args[2:]]
    assert main(["calibrate", *argv, "--hw", "h200-sxm", "--out", str(out)]) == 2, case
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_calibrating_interpreter_timings_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h200-cal.yaml"
    trace = _trace(tmp_path, None, "cpu (triton interpreter)")
    assert main(["calibrate", str(trace), "--hw", "h200-sxm", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "interpreter" in err and "h200-sxm" in err
    assert out.exists()


def test_long_commands_show_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate --against`, `calibrate --against` and `serve` draw tqdm bars on stderr (forced on
    here: by default only when stderr is a terminal)."""
    from mpsim.analysis.validation import calibration as cal

    monkeypatch.setattr(cal, "BW_GRID", np.array([0.8, 0.9]))
    monkeypatch.setattr(cal, "L2_SCALES", np.array([1.0]))
    monkeypatch.setattr(cal, "GOLDEN_STEPS", 2)
    monkeypatch.setenv("MPSIM_PROGRESS", "1")
    gemms = [f"gemm,{m},{n},4096,fp16,16,,,,,,,,,,,{5 + m / 8 + n / 1000:.2f},graph,"
             for m in (1, 16, 64) for n in (2048, 4096)]
    table = _table(tmp_path, *gemms)
    assert main(["validate", "--against", str(table), "--hw", "h200-sxm", "--no-cache"]) == 0
    assert "h200-sxm: simulate" in capsys.readouterr().err
    assert main(["calibrate", "--against", str(table), "--hw", "h200-sxm",
                 "--out", str(tmp_path / "c.yaml"), "--fit-rows", "4"]) == 0
    assert "calibrate on h200-sxm" in capsys.readouterr().err
    assert main(["serve", "--model", "mobilellama-1.4b", "--policy", "fp16", "--hw", "h200-sxm",
                 "--requests", "3", "--rate", "10", "--prompt-len", "32", "--gen-len", "4",
                 "--out", str(tmp_path / "s")]) == 0
    assert "request" in capsys.readouterr().err
    monkeypatch.setenv("MPSIM_PROGRESS", "0")
    assert main(["validate", "--against", str(table), "--hw", "h200-sxm", "--no-cache"]) == 0
    assert "simulate" not in capsys.readouterr().err
