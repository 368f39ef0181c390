"""docs/hardware.md#a-users-own-device: the worked example file loads, is priced as the family the
walkthrough says, runs a synthesized trace through the simulator by path, and a peak that does not
follow from SMs x FLOP/clk x clock is the one error the walkthrough promises."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.cli import main
from mpsim.hw_models import load_hardware
from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.gpu_spec import GpuSpec
from mpsim.sim.gpu.arch import generation

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rtx-5090.yaml"


def test_the_example_loads_with_datasheet_numbers_only() -> None:
    hw = load_hardware(str(EXAMPLE))
    assert isinstance(hw, GpuSpec) and hw.name == "rtx-5090"
    assert "per-device overrides of the simulator's constants: none" in hw.describe()
    assert hw.matrix_peak_flops("fp16") == pytest.approx(170 * 512 * 2407e6, rel=1e-3)
    assert hw.dram_bandwidth_Bps() == pytest.approx(1792e9)
    assert generation(hw) == "ampere"  # sm_120 issues mma.sync: the Ampere/Ada family


def test_a_synthesized_trace_runs_on_it_by_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    times = {}
    for policy in ("fp16", "w4"):
        trace = tmp_path / f"{policy}.parquet"
        assert main(["synth", "--model", "mobilellama-1.4b", "--policy", policy, "--prompt-len", "64",
                     "--gen-len", "4", "--engine", "vllm", "--hw", str(EXAMPLE), "--out", str(trace)]) == 0
        out = tmp_path / f"{policy}-sim.parquet"
        assert main(["simulate", str(trace), "--hw", str(EXAMPLE), "--out", str(out)]) == 0
        assert "on rtx-5090" in capsys.readouterr().out
        times[policy] = float(pd.read_parquet(out)["time_s"].sum())
    assert times["w4"] < times["fp16"]  # a 1.4B model's decode is weight-bound on any GPU


def test_a_peak_that_does_not_follow_from_the_sm_rate_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("fp16: 209.5, bf16: 209.5", "fp16: 419, bf16: 209.5"))
    with pytest.raises(HardwareFileError, match=r"bad.yaml: tensor_core.dense_peak_TFLOPs.fp16: 419 "
                       r"TFLOP/s is not compute.sm_count x flops_per_clock_per_SM x datasheet_clock_MHz = "
                       r"170 x 512 x 2407 MHz = 209.5"):
        load_hardware(str(bad))
