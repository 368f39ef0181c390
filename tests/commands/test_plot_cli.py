"""`mpsim plot`: each kind from the inputs it needs; a missing input is one clear line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.cli import main

SPEC = """
models: [mobilellama-1.4b]
policies: [fp16, w4]
hardware: [h100-sxm, npu-llm]
workloads: [{prompt_len: 16, gen_len: 3, batch: 1}]
perf_models: [roofline]
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plotcli")
    spec = root / "s.yaml"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--out", str(root / "sw"), "--workers", "1", "--no-progress"]) == 0
    trace = root / "t.parquet"
    assert main(["synth", "--model", "mobilellama-1.4b", "--policy", "w4", "--prompt-len", "16",
                 "--gen-len", "3", "--out", str(trace)]) == 0
    return {"results": root / "sw" / "results.parquet", "trace": trace, "root": root}


@pytest.mark.parametrize("kind", ["speedup", "memory", "energy"])
def test_table_kinds(files: dict[str, Path], kind: str) -> None:
    out = files["root"] / f"{kind}.png"
    assert main(["plot", str(files["results"]), "--kind", kind, "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize("kind", ["roofline", "timeline"])
def test_trace_kinds(files: dict[str, Path], kind: str) -> None:
    out = files["root"] / f"{kind}.svg"
    assert main(["plot", "--kind", kind, "--trace", str(files["trace"]), "--hw", "npu-llm",
                 "--perf-model", "roofline", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000


def test_pareto_from_a_csv_with_a_quality_column(files: dict[str, Path]) -> None:
    table = pd.read_parquet(files["results"])
    sel = table[table["hw"] == "npu-llm"].assign(rouge_l=[0.40, 0.37])
    csv = files["root"] / "q.csv"
    sel.to_csv(csv, index=False)
    out = files["root"] / "pareto.png"
    assert main(["plot", str(csv), "--kind", "pareto", "--quality", "rouge_l", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize(("args", "needle"), [
    (["--kind", "roofline", "--hw", "h100-sxm"], "needs a trace file (--trace)"),
    (["--kind", "speedup"], "needs a results table"),
    (["--kind", "validation", "--hw", "h100-sxm"], "needs a trace file"),
])
def test_missing_inputs(files: dict[str, Path], args: list[str], needle: str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", *args, "--out", str(files["root"] / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_validation_of_a_synthesized_trace_says_it_has_no_measurements(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "--kind", "validation", "--trace", str(files["trace"]), "--hw", "h100-sxm",
                 "--perf-model", "roofline", "--out", str(files["root"] / "v.png")]) == 2
    assert "no launch of the trace has measured_us" in capsys.readouterr().err


def test_timeline_and_validation_from_tables(files: dict[str, Path]) -> None:
    from mpsim.analysis.plots.inputs import trace_run
    from mpsim.hw_models.loader import load_hardware
    from mpsim.traces.io import read_trace

    run = trace_run(read_trace(files["trace"]), load_hardware("h200-sxm"), "roofline")
    launches = files["root"] / "launches.parquet"
    run[["op", "module", "phase", "step", "layer", "start_s", "end_s"]].to_parquet(launches)
    out = files["root"] / "tl.png"
    assert main(["plot", str(launches), "--kind", "timeline", "--step", "2", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    pairs = files["root"] / "pairs.csv"
    pd.DataFrame({"op": ["gemm", "norm"], "measured_s": [1e-5, 3e-6],
                  "predicted_s": [1.1e-5, 2e-6]}).to_csv(pairs, index=False)
    out = files["root"] / "val.png"
    assert main(["plot", str(pairs), "--kind", "validation", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
