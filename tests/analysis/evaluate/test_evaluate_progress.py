"""`mpsim evaluate` shows progress as sweeps do: a tqdm bar over the entries generated (quality) and
one over the runs simulated (speed), on stderr; none when asked for none."""

from __future__ import annotations

import pytest
from engine_cases import SMALL

from mpsim.analysis.evaluate.config import EvalConfig
from mpsim.analysis.evaluate.run import evaluate
from mpsim.engine.weights import dummy_weights

CFG = EvalConfig(policies=("fp16", "ap4", "ap3"), schedulers=("uniform-low", "random"), hw=("npu-llm",),
                 prompt_len=6, gen_len=4, val_samples=2, test_samples=2)


@pytest.mark.parametrize("bar", [True, False])
def test_evaluate_draws_progress_bars(capsys: pytest.CaptureFixture[str], bar: bool) -> None:
    ev = evaluate(dummy_weights(SMALL, 5), CFG, SMALL, None, progress=lambda _: None, bar=bar)
    assert list(ev.table["label"]) == ["fp16", "ap4", "ap3", "random"]  # uniform-low is ap3
    err = capsys.readouterr().err
    if bar:
        assert "evaluate: quality: 100%" in err and "5/5" in err  # fp16, ap4, ap3, uniform-low, random
        assert "evaluate: speed: 100%" in err and "4/4" in err    # 4 entries x 1 hardware
    else:
        assert err == ""
