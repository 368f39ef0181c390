"""The evaluation end to end on a small random model: every scheduler in one table with both bit
counts, quality and simulated speed; deterministic; written as Parquet/CSV/PNG; and the command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from engine_cases import SMALL

from mpsim.analysis.evaluate.config import EvalConfig, ladder_of
from mpsim.analysis.evaluate.report import write_evaluation
from mpsim.analysis.evaluate.run import Evaluation, evaluate
from mpsim.analysis.evaluate.schedulers import BUILDERS
from mpsim.cli import main
from mpsim.engine.scheduler import candidate_points
from mpsim.engine.weights import dummy_weights
from mpsim.errors import MpsimInputError
from mpsim.schedulers.learned import ClassifierConfig, KVClassifier, save_classifier

CFG = EvalConfig(policies=("fp16", "ap4", "ap3", "ap4-3"), schedulers=(*BUILDERS, "budget@3.75"),
                 hw=("h200-sxm",), prompt_len=8, gen_len=7, val_samples=3, test_samples=5, budget_bits=3.4)
STEPS = CFG.gen_len - 1


@pytest.fixture(scope="module")
def learned_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("learned")
    model = KVClassifier(ClassifierConfig(SMALL.head_dim, hidden=8, queries=2))
    save_classifier(model, folder, {"class_prior": [0.4, 0.3, 0.2, 0.1]})
    return folder


@pytest.fixture(scope="module")
def ev(learned_dir: Path) -> Evaluation:
    return evaluate(dummy_weights(SMALL, 5), CFG, SMALL, learned_dir, progress=lambda _: None)


def _row(t: pd.DataFrame, label: str) -> pd.Series:
    sel = t[t["label"] == label]
    assert len(sel) == 1, f"{label}: {len(sel)} rows"
    return sel.iloc[0]


def test_every_scheduler_has_a_row_with_both_bit_counts(ev: Evaluation) -> None:
    t = ev.table
    labels = set(t["label"])
    assert {"fp16", "ap4", "ap3", "ap4-3", "phase-aware", "static", "learned", "random", "random-prior",
            "confidence", "budget", "oracle"} <= labels
    quantized = t[t["label"] != "fp16"]
    assert quantized[["avg_bits_pmpd", "avg_bits_mean"]].notna().all().all()
    assert ((quantized["avg_bits_mean"] >= 3) & (quantized["avg_bits_mean"] <= 4)).all()
    for col in ("rouge_l_bytes", "rouge_l_words", "agreement", "bits_per_byte", "ttft_ms", "tpot_ms",
                "tokens_per_s", "speedup_vs_fp16", "speedup_vs_high", "perf_model", "speed_model"):
        assert t[col].notna().all(), col


def test_reference_rows_are_their_own_baselines(ev: Evaluation) -> None:
    fp16, high = _row(ev.table, "fp16"), _row(ev.table, "ap4")
    assert fp16["rouge_l_bytes"] == 1.0 and fp16["agreement"] == 1.0
    # a row's time is the mean over its sequences: equal only up to the rounding of that mean
    assert fp16["speedup_vs_fp16"] == pytest.approx(1.0, rel=1e-12)
    assert high["speedup_vs_high"] == pytest.approx(1.0, rel=1e-12) and high["kept_vs_high"] == 1.0
    assert high["avg_bits_pmpd"] == high["avg_bits_mean"] == 4.0


def test_static_bits_follow_its_switch_point(ev: Evaluation) -> None:
    s = ev.choices["static"]["switch"]
    assert s in candidate_points(CFG.gen_len)
    high_steps = min(s, STEPS)
    row = _row(ev.table, "static")
    assert row["avg_bits_mean"] == pytest.approx((4 * high_steps + 3 * (STEPS - high_steps)) / STEPS)
    assert row["mean_switch_step"] == high_steps


def test_oracle_keeps_all_high_quality_on_every_prompt(ev: Evaluation) -> None:
    # labels come from separate fixed-policy runs; the oracle replays them in one mixed batch
    assert _row(ev.table, "oracle")["kept_vs_high"] == 1.0


@pytest.mark.parametrize(("label", "target"), [("budget", 3.4), ("budget@3.75", 3.75)])
def test_budget_meets_its_target(ev: Evaluation, label: str, target: float) -> None:
    got = _row(ev.table, label)["avg_bits_mean"]
    assert abs(got - target) <= 0.5 / (CFG.test_samples * STEPS) + 1e-12


def test_switch_table_compares_learned_with_random(ev: Evaluation) -> None:
    st = ev.switch_table.set_index("scheduler")
    for name in ("learned", "random", "random-prior", "static", "oracle", "(test labels)",
                 "random (expected)", "random-prior (expected)"):
        counts = [float(part.split(":")[1]) for part in st.loc[name, "histogram"].split()]
        assert sum(counts) == pytest.approx(CFG.test_samples), name
    assert st.loc["oracle", "label_accuracy"] == 1.0 and st.loc["oracle", "kept_vs_high"] == 1.0
    assert st.loc["random (expected)", "label_accuracy"] == pytest.approx(0.25)
    labels = [float(part.split(":")[1]) for part in st.loc["(test labels)", "histogram"].split()]
    prior = np.array([0.4, 0.3, 0.2, 0.1])  # the fixture classifier's prior
    expected = prior @ labels / CFG.test_samples
    assert st.loc["random-prior (expected)", "label_accuracy"] == pytest.approx(expected)
    # the oracle picks the labels, so its generation is exactly the labels' expected row
    for col in ("rouge_l", "kept_vs_high", "avg_bits_mean", "avg_bits_pmpd"):
        assert st.loc["oracle", col] == pytest.approx(st.loc["(test labels)", col], rel=1e-12), col
    assert 0.0 <= st.loc["learned", "label_accuracy"] <= 1.0


def test_evaluation_is_deterministic(ev: Evaluation, learned_dir: Path) -> None:
    cfg = EvalConfig(policies=CFG.policies, schedulers=("static", "learned", "random", "budget"),
                     hw=CFG.hw, prompt_len=8, gen_len=7, val_samples=3, test_samples=5, budget_bits=3.4)
    again = evaluate(dummy_weights(SMALL, 5), cfg, SMALL, learned_dir, progress=lambda _: None).table
    first = ev.table.set_index("label").loc[again["label"]].reset_index()
    pd.testing.assert_frame_equal(again.reset_index(drop=True), first[again.columns])


def test_written_files(ev: Evaluation, tmp_path: Path) -> None:
    paths = {p.name for p in write_evaluation(ev, tmp_path)}
    assert {"evaluation.parquet", "evaluation.csv", "pareto.png", "quality_vs_bits.png", "choices.json",
            "switch_points.csv", "evaluation.md"} <= paths
    back = pd.read_parquet(tmp_path / "evaluation.parquet")
    pd.testing.assert_frame_equal(back, ev.table)
    assert (tmp_path / "pareto.png").stat().st_size > 10_000
    assert (tmp_path / "quality_vs_bits.png").stat().st_size > 10_000
    assert "bits (PMPD)" in (tmp_path / "evaluation.md").read_text()


def test_bad_requests_name_the_choices() -> None:
    with pytest.raises(MpsimInputError, match="highest and lowest"):
        ladder_of(EvalConfig(policies=("fp16", "ap4")))
    assert ladder_of(EvalConfig(policies=("ap4-4@8-3", "ap2"))).widths == (4, 2)
    with pytest.raises(MpsimInputError, match="budget@BITS"):
        evaluate(dummy_weights(SMALL, 5), EvalConfig(policies=("ap4", "ap3"), schedulers=("psychic",),
                                                     val_samples=2, test_samples=2, gen_len=3, prompt_len=4),
                 SMALL, None, progress=lambda _: None)


def test_the_command_on_the_tiny_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["evaluate", "--model", "tiny", "--policies", "fp16,ap4,ap3", "--schedulers",
               "phase-aware,static,learned", "--hw", "npu-llm", "--val-samples", "2", "--test-samples", "2",
               "--prompt-len", "16", "--gen-len", "6", "--out", str(tmp_path)])
    assert rc == 0
    table = pd.read_csv(tmp_path / "evaluation.csv")
    assert list(table["label"]) == ["fp16", "ap4", "ap3", "phase-aware", "static", "learned"]
    assert np.isfinite(table["speedup_vs_fp16"]).all()
    assert "Speed on npu-llm" in capsys.readouterr().out
    assert main(["evaluate", "--model", "vicuna-7b", "--out", str(tmp_path)]) == 2
