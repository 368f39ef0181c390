"""Start-up: a command imports what it uses, when it uses it.

Building the parser loads no command's implementation; `synth`, `simulate`, `op`, `roofline`, `hw`
and `models` never load torch, triton or matplotlib; `synth` loads no pandas (numpy columns go
straight to Arrow) and a warm-memo `simulate` no simpy; `mpsim --help` and `mpsim op` on a GPU load
neither numpy nor pandas (`mpsim op` on an NPU goes through the NPU step model, which prices whole
steps with numpy and pandas: mpsim/sim/launch.py). Each case runs in a fresh interpreter, as a
user's command does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpsim.commands.common import PERF_MODEL_NAMES
from mpsim.sim import PERF_MODELS

ENGINE_AND_PLOTS = {"torch", "triton", "matplotlib", "numba"}
TABLES = {"numpy", "pandas", "pyarrow", "simpy"}

PROBE = """
import json, sys
from mpsim.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted({m.split('.')[0] for m in sys.modules})
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def loaded_by(*argv: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                            timeout=300)
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), result.stderr
    return set(report["loaded"])


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "t.parquet"
    loaded = loaded_by("synth", "--model", "mobilellama-1.4b", "--policy", "ap4-3", "--prompt-len", "16",
                       "--gen-len", "3", "--out", str(path))
    assert not loaded & ENGINE_AND_PLOTS, f"synth loaded {loaded & ENGINE_AND_PLOTS}"
    assert not loaded & {"pandas", "simpy"}, f"synth loaded {loaded & {'pandas', 'simpy'}}"
    return path


def test_help_and_op_load_no_tables_engine_or_plots() -> None:
    for argv in (("--help",), ("op", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--hw", "h200-sxm"),
                 ("op", "attention", "--batch", "1", "--q-len", "1", "--kv-len", "512", "--heads", "32",
                  "--kv-heads", "8", "--head-dim", "128", "--kv-bits", "8", "--hw", "h100-sxm"),
                 ("models",), ("hw", "list")):
        heavy = loaded_by(*argv) & (ENGINE_AND_PLOTS | TABLES - {"simpy"})
        assert not heavy, f"mpsim {' '.join(argv)} loaded {sorted(heavy)}"
    npu = ("op", "attention", "--batch", "1", "--q-len", "1", "--kv-len", "512", "--heads", "32",
           "--kv-heads", "8", "--head-dim", "128", "--kv-bits", "8", "--hw", "npu-llm")
    assert not loaded_by(*npu) & ENGINE_AND_PLOTS


def test_trace_commands_load_no_engine_or_plots(trace: Path, tmp_path: Path) -> None:
    for argv in (("simulate", str(trace), "--hw", "h200-sxm", "--no-cache"),
                 ("simulate", str(trace), "--hw", "npu-llm", "--out", str(tmp_path / "r.parquet"),
                  "--timeline", str(tmp_path / "t.json"), "--no-cache"),
                 ("roofline", str(trace), "--hw", "h100-sxm", "--out", str(tmp_path / "b.csv"))):
        heavy = loaded_by(*argv) & ENGINE_AND_PLOTS
        assert not heavy, f"mpsim {' '.join(argv)} loaded {sorted(heavy)}"


def test_the_parser_names_the_registered_models() -> None:
    assert tuple(PERF_MODELS) == PERF_MODEL_NAMES


def test_a_warm_memo_loads_no_simulator(trace: Path, tmp_path: Path) -> None:
    """Every launch found in the memo: the SimPy models (simpy) are never imported."""
    argv = ("simulate", str(trace), "--hw", "h200-sxm", "--cache-dir", str(tmp_path / "memo"))
    assert "simpy" in loaded_by(*argv)  # cold: the distinct launches are simulated
    assert "simpy" not in loaded_by(*argv)  # warm: all from the memo
