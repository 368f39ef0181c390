"""The every-stack report on a tiny fake ground truth: two stacks of one GPU, a GPU without a
hardware file, the efficiency roofline fitted on the other stack, unrepresentable rows counted,
per-table results reused by a rerun."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation import stacks
from mpsim.analysis.validation.metrics import eff_roofline, fit_eff_roofline
from mpsim.analysis.validation.stacks import add_effroof, find_tables, fit_source
from mpsim.analysis.validation.stacks_md import unrepresentable

KERNEL_SOURCE = {"vllm": "vllm_flash_attn_fa3", "trtllm": "torch_flow"}  # what each file names


def _decode(framework: str, version: str, slow: float, n: int = 8) -> pd.DataFrame:
    """Decode attention rows of one stack; the last one under a binding sliding window."""
    batch = np.array([1, 2, 4, 8, 16, 32, 64, 128])[:n]
    return pd.DataFrame({
        "framework": framework, "version": version, "device": "NVIDIA H200",
        "op_name": "generation_attention", "kernel_source": KERNEL_SOURCE[framework],
        "batch_size": batch, "isl": 1, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "window_size": [0] * (n - 1) + [128], "beam_width": 1, "attn_dtype": "bfloat16",
        "kv_cache_dtype": "bfloat16", "step": 1023, "latency": slow * (0.012 + batch * 1e-3)})


def _tree(root: Path) -> Path:
    gt = root / "gt"
    for gpu, framework, version, slow in (("h200_sxm", "vllm", "0.24.0", 1.0),
                                          ("h200_sxm", "trtllm", "1.3.0rc20", 1.5),
                                          ("zz_gpu", "vllm", "0.24.0", 1.0)):
        folder = gt / "aiconfigurator" / gpu / "attention" / framework / version
        folder.mkdir(parents=True)
        _decode(framework, version, slow).to_parquet(folder / "generation_attention_perf.parquet")
    return gt


def _doc(root: Path) -> Path:
    doc = root / "v.md"
    doc.write_text("intro\n<!-- validation:stacks -->\nOLD\n<!-- /validation:stacks -->\nmid\n"
                   "<!-- validation:stacks-kernels -->\n<!-- /validation:stacks-kernels -->\nend\n")
    return doc


def test_fit_source_prefers_another_framework() -> None:
    sizes = {"vllm 0.24.0": 10, "trtllm 1.3.0rc20": 5, "trtllm 1.2.0rc5": 50}
    assert fit_source("trtllm 1.2.0rc5", sizes) == "vllm 0.24.0"      # not the other trtllm
    assert fit_source("vllm 0.24.0", sizes) == "trtllm 1.2.0rc5"      # the most rows
    assert fit_source("trtllm 1.2.0rc5", {"trtllm 1.2.0rc5": 9, "trtllm 1.3.0rc20": 4}) \
        == "trtllm 1.3.0rc20"                                         # another version if alone
    assert fit_source("vllm 0.24.0", {"vllm 0.24.0": 9}) is None


def test_effroof_is_fitted_on_the_other_stack() -> None:
    rng = np.random.default_rng(3)
    tm, tb = rng.uniform(1, 50, 40), rng.uniform(1, 50, 40)
    rows = pd.DataFrame({"gpu": "h200_sxm", "cls": "gemm bf16", "status": "ok",
                         "stack": ["a 1"] * 20 + ["b 1"] * 20, "t_math_us": tm, "t_mem_us": tb,
                         "measured_us": np.maximum(tm, tb) * np.r_[np.full(20, 1.2), np.full(20, 2.0)]})
    add_effroof(rows)
    a, b = rows["stack"] == "a 1", rows["stack"] == "b 1"
    fit_b = fit_eff_roofline(tm[20:], tb[20:], rows["measured_us"][b])
    assert rows.loc[a, "effroof_us"].tolist() == eff_roofline(tm[:20], tb[:20], *fit_b).tolist()
    assert set(rows.loc[a, "effroof_from"]) == {"b 1"} and set(rows.loc[b, "effroof_from"]) == {"a 1"}


def test_unrepresentable_counts_and_top_reason() -> None:
    g = pd.DataFrame({"status": ["ok", "unrepresentable: b", "unrepresentable: a", "unrepresentable: b",
                                 "simulator error: x"]})
    assert unrepresentable(g) == (3, "b")
    assert unrepresentable(g.iloc[:1]) == (0, "")


def test_report_on_a_fake_tree_two_stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gt, doc, work = _tree(tmp_path), _doc(tmp_path), tmp_path / "work"
    tables, skipped = find_tables(gt)
    assert [t.stack for t in tables] == ["trtllm 1.3.0rc20", "vllm 0.24.0"] and skipped == ["zz_gpu"]
    args = ["--groundtruth", str(gt), "--doc", str(doc), "--sample", "5", "--work", str(work),
            "--cache-dir", str(tmp_path / "memo")]
    assert stacks.main(args) == 0
    text = doc.read_text()
    assert "OLD" not in text and text.startswith("intro\n") and "\nmid\n" in text and text.endswith("end\n")
    assert "at most **5 rows per table**" in text and "Not priced (no hardware file): zz_gpu" in text
    lines = {line.split(" | ")[1]: line for line in text.splitlines()
             if line.startswith("| H200 SXM | ") and "| attention decode kv16 | all |" in line}
    assert set(lines) == {"trtllm 1.3.0rc20", "vllm 0.24.0"}
    assert "| vllm 0.24.0 |" in lines["trtllm 1.3.0rc20"] and "| trtllm 1.3.0rc20 |" in lines["vllm 0.24.0"]
    # the binding window: priced by FA3's room (vLLM) and TensorRT-LLM's (Hopper)
    assert "| 5 | 0 |  | 5 |" in lines["vllm 0.24.0"] and "| 5 | 0 |  | 5 |" in lines["trtllm 1.3.0rc20"]
    assert "| `vllm_flash_attn_fa3` | 8 | 5 | 5 |" in text  # kernel_source: selected, sampled, priced
    assert len(list(work.glob("*.rows.parquet"))) == 2

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a finished table was priced again")

    monkeypatch.setattr(stacks, "price_table", refuse)
    doc.write_text(_doc(tmp_path).read_text())
    assert stacks.main(args) == 0 and doc.read_text() == text  # a rerun reuses every table
    done = sorted(work.glob("*.rows.parquet"))
    done[0].unlink()                                            # as if interrupted before it
    monkeypatch.undo()
    priced: list[str] = []
    real = stacks.price_table

    def counted(t: stacks.Table, *a: Any, **k: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
        priced.append(t.stack)
        return real(t, *a, **k)

    monkeypatch.setattr(stacks, "price_table", counted)
    assert stacks.main(args) == 0 and len(priced) == 1 and doc.read_text() == text
