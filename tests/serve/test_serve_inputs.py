"""Bad input is one clear error naming the file, the row and the value; the command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.cli import main
from mpsim.errors import MpsimInputError
from mpsim.models import get_model
from mpsim.serve.arrivals import build_requests, parse_lengths, parse_switch_dist, read_arrivals_csv
from mpsim.serve.context import check_context, context_length

VICUNA = get_model("vicuna-7b")
GOOD = "arrival_s,prompt_len,gen_len\n0.0,100,10\n0.5,200,20\n0.5,300,30\n"


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "arrivals.csv"
    path.write_text(text)
    return path


def test_a_good_csv_reads_whole(tmp_path: Path) -> None:
    reqs = read_arrivals_csv(_csv(tmp_path, GOOD), VICUNA)
    assert list(reqs.arrival_s) == [0.0, 0.5, 0.5] and list(reqs.prompt_len) == [100, 200, 300]
    assert list(reqs.switch_step) == [-1, -1, -1]
    with_switch = read_arrivals_csv(_csv(tmp_path, "arrival_s,prompt_len,gen_len,switch_step\n2,5,6,3\n"),
                                    VICUNA)
    assert with_switch.arrival_s[0] == 0.0 and with_switch.switch_step[0] == 3  # times start at 0


@pytest.mark.parametrize(("text", "message"), [
    ("arrival_s,prompt_len\n0,1\n", r"row 0 \(header\): missing column 'gen_len'"),
    ("arrival_s,prompt_len,gen_len\n0,100,10\n1,-5,10\n", r"row 2: prompt_len '-5': must be >= 1"),
    ("arrival_s,prompt_len,gen_len\n0,100,10\n1,100,0\n", r"row 2: gen_len '0': must be >= 1"),
    ("arrival_s,prompt_len,gen_len\n0,100,10\n2,100,10\n1.5,100,10\n",
     r"row 3: arrival_s '1.5' is earlier than row 2's '2'"),
    ("arrival_s,prompt_len,gen_len\n0,5000,10\n", r"row 1: prompt_len 5000 \+ gen_len 10 = 5010 tokens "
                                                  r"exceeds vicuna-7b's context of 4096"),
    ("arrival_s,prompt_len,gen_len\n0,100,ten\n", r"row 1: gen_len 'ten': expected an integer"),
    ("arrival_s,prompt_len,gen_len\nsoon,100,10\n", r"row 1: arrival_s 'soon': expected seconds >= 0"),
    ("arrival_s,prompt_len,gen_len\n0,100\n", r"row 1: gen_len is empty"),
    ("arrival_s,prompt_len,gen_len\n", r"no request rows"),
])
def test_a_bad_csv_names_file_row_and_value(tmp_path: Path, text: str, message: str) -> None:
    path = _csv(tmp_path, text)
    with pytest.raises(MpsimInputError, match=message) as err:
        read_arrivals_csv(path, VICUNA)
    assert str(path) in str(err.value)


def test_context_is_checked_unless_allowed(tmp_path: Path) -> None:
    assert context_length(VICUNA) == 4096
    check_context(VICUNA, 4000, 96)
    with pytest.raises(MpsimInputError, match="--allow-beyond-context"):
        check_context(VICUNA, 4000, 97)
    check_context(VICUNA, 4000, 97, allow_beyond=True)
    with pytest.raises(MpsimInputError, match="--prompt-len/--gen-len: prompt_len 4096"):
        build_requests(VICUNA, rate=1.0, requests=2, prompt_len=4096, gen_len=8)
    drawn = build_requests(VICUNA, rate=1.0, requests=400, prompt_len="lognormal:2000:1.0", gen_len=256)
    assert (drawn.prompt_len + drawn.gen_len <= 4096).all() and drawn.clipped > 0
    assert (drawn.gen_len == 256).all()  # a given output length is kept, the drawn prompt is cut


@pytest.mark.parametrize("text", ["0", "abc", "uniform:5", "uniform:9:3", "lognormal:0:1", "zipf:1:2"])
def test_bad_length_spellings(text: str) -> None:
    with pytest.raises(MpsimInputError, match="--prompt-len"):
        parse_lengths(text, "--prompt-len")


def test_length_distributions_and_arrivals_draw_as_documented() -> None:
    rng = np.random.default_rng(0)
    u = parse_lengths("uniform:10:20", "x").draw(rng, 5000)
    assert u.min() == 10 and u.max() == 20
    ln = parse_lengths("lognormal:300:0.5:900", "x").draw(rng, 20000)
    assert np.median(ln) == pytest.approx(300, rel=0.03) and ln.max() <= 900
    gamma = build_requests(VICUNA, arrivals="gamma:2", rate=5.0, requests=20000, seed=1)
    gaps = np.diff(gamma.arrival_s)
    assert gaps.mean() == pytest.approx(0.2, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(2, rel=0.1)
    timed = build_requests(VICUNA, rate=10.0, duration_s=50.0)
    assert timed.arrival_s.max() <= 50.0 and len(timed) == pytest.approx(500, rel=0.15)


def test_switch_points_from_an_evaluation_table(tmp_path: Path) -> None:
    table = tmp_path / "switch_points.csv"
    table.write_text("scheduler,mean_switch_step,histogram\nlearned,8.4,S=0:12 S=11:6 S=21:5 S=32:1\n")
    steps, weights = parse_switch_dist(f"{table}:learned")
    assert list(steps) == [0, 11, 21, 32] and list(weights) == [12, 6, 5, 1]
    assert list(parse_switch_dist("4:1,8:3")[0]) == [4, 8]
    with pytest.raises(MpsimInputError, match="no row for scheduler 'static'"):
        parse_switch_dist(f"{table}:static")
    with pytest.raises(MpsimInputError, match="--switch-dist"):
        parse_switch_dist("4:-1")


def test_the_command_writes_its_tables_and_reports_an_unmet_slo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["serve", "--model", "mobilellama-1.4b", "--policy", "w4+kv8", "--hw", "h200-sxm",
                 "--rate", "50", "--requests", "40", "--prompt-len", "128", "--gen-len", "16",
                 "--slo-tpot-ms", "0.001", "--slo-ttft-ms", "1000", "--perf-model", "roofline",
                 "--timeline", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "p99 NOT MET" in text and "attainment 0.0%" in text
    reqs = pd.read_parquet(out / "requests.parquet")
    for col in ("arrival_s", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2e_s", "preemptions"):
        assert col in reqs.columns
    assert len(reqs) == 40 and len(pd.read_parquet(out / "iterations.parquet")) > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["slo_met"] is False and summary["goodput_rps"] == 0.0
    assert summary["peak_concurrent_sequences"] >= 1
    assert json.loads((out / "timeline.json").read_text())["traceEvents"]


def test_the_command_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _csv(tmp_path, "arrival_s,prompt_len,gen_len\n0,100,10\n1,-3,10\n")
    code = main(["serve", "--model", "vicuna-7b", "--policy", "fp16", "--hw", "h200-sxm",
                 "--arrivals", str(bad), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "row 2: prompt_len '-3'" in err
