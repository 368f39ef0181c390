"""Bad input, class by class: every case is one `mpsim: error:` line naming the file, row, key or value
and what was expected (exit 2, no traceback), never a traceback or a silently wrong result (issue 21).

Sizes past the stated limits (mpsim/limits.py) are in test_bad_sizes.py; chat templates in
tests/engine/test_chat_limits.py; the parsers under random input in tests/fuzz/test_fuzz_parsers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bad_input_cases import BINARY, GENERIC_HEADER, clear_error, hw_yaml, tiny_config, write

from mpsim.cli import main

# ---- a binary file where text is expected --------------------------------------------------------

BINARY_CASES: dict[str, Callable[[str, Path], list[str]]] = {
    "--hw": lambda f, d: ["op", "gemm", "--m", "1", "--n", "64", "--k", "64", "--hw", f + ".yaml"],
    "hw show": lambda f, d: ["hw", "show", f + ".yaml"],
    "validate --against": lambda f, d: ["validate", "--against", f + ".csv", "--hw", "h200-sxm"],
    "calibrate --against": lambda f, d: ["calibrate", "--against", f + ".csv", "--hw", "h200-sxm",
                                         "--out", str(d / "c.yaml")],
    "--calibration": lambda f, d: ["validate", "--against", write(d / "ok.csv", GENERIC_HEADER
                                   + "gemm,16,256,256,fp16,16,,10.0,kernel\n"), "--hw", "h200-sxm",
                                   "--calibration", f + ".yaml"],
    "sweep spec": lambda f, d: ["sweep", f + ".yaml", "--out", str(d / "sweep")],
    "--arrivals": lambda f, d: ["serve", "--model", "tiny", "--policy", "fp16", "--hw", "h200-sxm",
                                "--out", str(d / "serve"), "--arrivals", f + ".csv"],
    "config.json": lambda f, d: ["synth", "--model", f + ".json", "--policy", "fp16", "--prompt-len", "4",
                                 "--gen-len", "2", "--out", str(d / "t.parquet")],
}


@pytest.mark.parametrize("case", BINARY_CASES)
def test_a_binary_file_is_one_error_naming_it(case: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    stem = tmp_path / "binary"
    for suffix in (".yaml", ".csv", ".json"):
        write(stem.with_suffix(suffix), BINARY)
    argv = BINARY_CASES[case](str(stem), tmp_path)
    named = next(a for a in argv if a.startswith(str(stem)))
    assert "UTF-8" in clear_error(argv, capsys, named).upper()


@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_an_empty_measurement_csv_is_one_error(command: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    empty = write(tmp_path / "empty.csv", "")
    extra = ["--out", str(tmp_path / "c.yaml")] if command == "calibrate" else []
    clear_error([command, "--against", empty, "--hw", "h200-sxm", *extra], capsys, empty, "empty file")


# ---- config.json values ------------------------------------------------------------------------

CONFIG_CASES: dict[str, tuple[dict[str, object], str]] = {
    "heads 0": ({"num_attention_heads": 0}, "num_attention_heads: expected a whole number >= 1, got 0"),
    "heads 'four'": ({"num_attention_heads": "four"}, "num_attention_heads: expected a whole number >= 1, "
                     "got 'four'"),
    "layers null": ({"num_hidden_layers": None}, "num_hidden_layers: missing or null"),
    "rotary 'half'": ({"partial_rotary_factor": "half"}, "partial_rotary_factor: expected a number (0, 1], "
                      "got 'half'"),
    "rotary 1.5": ({"partial_rotary_factor": 1.5}, "partial_rotary_factor"),
    "hidden 256.7": ({"hidden_size": 256.7}, "hidden_size: expected a whole number >= 1, got 256.7"),
    "hidden 250, 4 heads": ({"hidden_size": 250}, "hidden_size: 250 is not a multiple of "
                            "num_attention_heads 4"),
    "kv heads 3": ({"num_key_value_heads": 3}, "num_key_value_heads: 3 does not divide"),
    "flag 'yes'": ({"tie_word_embeddings": "yes"}, "tie_word_embeddings: expected true or false"),
    "layers true": ({"num_hidden_layers": True}, "num_hidden_layers: expected a whole number >= 1, got True"),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_a_bad_config_json_value_is_named(case: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    changes, needle = CONFIG_CASES[case]
    config = tiny_config(tmp_path / "model", **changes)
    clear_error(["synth", "--model", str(config), "--policy", "fp16", "--prompt-len", "4", "--gen-len",
                 "2", "--out", str(tmp_path / "t.parquet")], capsys, str(config), needle)
    assert not (tmp_path / "t.parquet").exists()


# ---- options checked before any work -----------------------------------------------------------

OPTION_CASES: dict[str, tuple[list[str], str]] = {
    "generate --gen-len 0": (["generate", "--prompt", "hi", "--gen-len", "0"], "--gen-len 0: expected"),
    "generate --gen-len -3": (["generate", "--prompt", "hi", "--gen-len", "-3"], "--gen-len -3: expected"),
    "generate --prompt ''": (["generate", "--prompt", ""], "--prompt '': expected some text"),
    "quality --samples 0": (["quality", "--policy", "w4", "--samples", "0"], "--samples 0: expected"),
    "quality --policy w5": (["quality", "--policy", "fp16,w5"], "bad policy 'w5'"),
    "evaluate --segments 0": (["evaluate", "--segments", "0", "--out", "{out}"], "--segments: expected 1.."),
    "evaluate --hw nope": (["evaluate", "--hw", "h200-sxm,nope", "--out", "{out}"],
                           "unknown hardware 'nope'"),
    "evaluate --schedulers nope": (["evaluate", "--schedulers", "static,nope", "--out", "{out}"],
                                   "unknown scheduler 'nope'"),
    "evaluate budget@x": (["evaluate", "--schedulers", "budget@x", "--out", "{out}"], "budget@BITS"),
    "train-scheduler --segments 0": (["train-scheduler", "--segments", "0", "--out", "{out}"],
                                     "--segments: expected 1.."),
    "op gemm --bits 5": (["op", "gemm", "--m", "16", "--n", "256", "--k", "256", "--w-format", "group",
                          "--bits", "5", "--hw", "h200-sxm"], "group weights at 5 bits: expected bits in"),
    "op gemm anyprec --bits 9": (["op", "gemm", "--m", "16", "--n", "256", "--k", "256", "--w-format",
                                  "anyprec", "--bits", "9", "--hw", "h200-sxm"], "anyprec weights at 9 bits"),
    "op gemm --group 7": (["op", "gemm", "--m", "16", "--n", "256", "--k", "256", "--w-format", "group",
                           "--bits", "4", "--group", "7", "--hw", "h200-sxm"], "group size 7: expected a "
                          "multiple of 32"),
    "serve --prompt-len uniform:1:inf": (["serve", "--model", "tiny", "--policy", "fp16", "--hw", "h200-sxm",
                                          "--out", "{out}", "--rate", "1", "--requests", "3", "--prompt-len",
                                          "uniform:1:inf"], "'uniform:1:inf': expected finite numbers"),
    "synth --out s.csv": (["synth", "--model", "tiny", "--policy", "fp16", "--prompt-len", "4", "--gen-len",
                           "2", "--out", "{out}/s.csv"], "s.csv: a trace is written as Parquet"),
}


@pytest.mark.parametrize("case", OPTION_CASES)
def test_a_bad_option_is_refused_before_any_work(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import mpsim.tiny.shipped

    def work_started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was opened before the options were checked")

    monkeypatch.setattr(mpsim.tiny.shipped, "open_text_model", work_started)
    argv, needle = OPTION_CASES[case]
    out = tmp_path / "out"
    clear_error([a.replace("{out}", str(out)) for a in argv], capsys, needle)
    assert not out.exists()  # nothing written: refused before the work


def test_a_group_size_the_kernels_take_is_priced(capsys: pytest.CaptureFixture[str]) -> None:
    for group in ("64", "0", "256"):
        assert main(["op", "gemm", "--m", "16", "--n", "256", "--k", "256", "--w-format", "group",
                     "--bits", "4", "--group", group, "--hw", "h200-sxm"]) == 0
    assert capsys.readouterr().out.count("gemv_group_kernel") == 3


# ---- files whose values contradict each other or escape the output folder -------------------------

def test_a_trace_whose_w_bits_disagrees_with_w_format_names_the_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "w4.parquet"
    assert main(["synth", "--model", "tiny", "--policy", "w4", "--prompt-len", "8", "--gen-len", "2",
                 "--out", str(good)]) == 0
    table = pq.read_table(good)
    formats, bits = table.column("w_format").to_pylist(), table.column("w_bits").to_pylist()
    row = formats.index("int4-group")
    bits[row] = 8
    field = table.schema.field("w_bits")
    bad = tmp_path / "w8-bits.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("w_bits"), field,
                                    pa.array(bits, type=field.type)), bad)
    for command in ("simulate", "roofline"):
        clear_error([command, str(bad), "--hw", "h200-sxm"], capsys, str(bad), f"row {row}", "'w_bits'",
                    "8 disagrees with w_format 'int4-group' (expected 4)")


@pytest.mark.parametrize("name", ["../../escaped", "a/b", "a\\\\b", ".hidden", ".."])
def test_a_hardware_name_that_cannot_name_a_file_is_refused(name: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = hw_yaml(tmp_path / "mine.yaml", "name: h200-sxm\n", f"name: {name}\n")
    clear_error(["hw", "show", path], capsys, path, "name:", "cannot name a file")


@pytest.mark.parametrize("kind", ["speedup", "pareto", "memory"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_results_table_without_rows_is_one_error(kind: str, suffix: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    columns = {"speedup": ["model", "policy", "hw", "perf_model", "prompt_len", "gen_len", "batch",
                           "speedup_vs_fp16"],
               "pareto": ["policy", "speedup", "quality"],
               "memory": ["model", "policy", "hw", "perf_model", "prompt_len", "gen_len", "batch",
                          "weights_bytes", "kv_cache_bytes", "peak_activation_bytes"]}[kind]
    path = tmp_path / f"results{suffix}"
    empty = pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})
    empty.to_csv(path, index=False) if suffix == ".csv" else empty.to_parquet(path)
    clear_error(["plot", "--kind", kind, str(path), "--out", str(tmp_path / "p.png")], capsys, "no rows")
    assert not (tmp_path / "p.png").exists()


# ---- measured times ----------------------------------------------------------------------------

# Vidur rows expand to one per (input row, op), as in the rows file: input row 2's `add` is row 20
VIDUR_CASES = {"a NaN time": ("time_stats.add.mean", "nan", "row 20, column 'measured_us'"),
               "0 heads": ("n_head", "0", "row 2, column 'n_head': expected a whole number >= 1, got '0'"),
               "a word for a size": ("n_embd", "wide", "row 2, column 'n_embd'")}


@pytest.mark.parametrize("case", VIDUR_CASES)
def test_a_bad_vidur_value_names_the_row(case: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from mpsim.analysis.validation.sources import VIDUR_OPS, VIDUR_SIZES, VIDUR_STAT

    column, value, needle = VIDUR_CASES[case]
    times = [f"time_stats.{op}.{VIDUR_STAT}" for op in VIDUR_OPS]
    header = [*VIDUR_SIZES, *times]
    good = {"num_tokens": "16", "num_tensor_parallel_workers": "1", "n_embd": "4096",
            "n_expanded_embd": "11008", "n_head": "32", "n_kv_head": "8"} | dict.fromkeys(times, "0.01")
    bad = good | {column: value}
    path = write(tmp_path / "mlp.csv", "\n".join(",".join(row[c] for c in header) for row in
                                                 [dict(zip(header, header, strict=True)), good, bad]) + "\n")
    clear_error(["validate", "--against", path, "--hw", "h200-sxm"], capsys, path, needle)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", ""])
def test_a_measured_time_that_is_not_a_finite_positive_number_names_the_row(
        value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "m.csv", GENERIC_HEADER + "gemm,16,256,256,fp16,16,,10.0,kernel\n"
                 f"gemm,16,256,256,fp16,16,,{value},kernel\n")
    clear_error(["validate", "--against", path, "--hw", "h200-sxm"], capsys, path, "row 2",
                "'measured_us'", "finite time")


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_a_trace_time_that_is_not_finite_names_the_row(value: float, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.parquet"
    assert main(["synth", "--model", "tiny", "--policy", "fp16", "--prompt-len", "8", "--gen-len", "2",
                 "--out", str(trace)]) == 0
    table = pq.read_table(trace)
    times = [10.0] * table.num_rows
    times[3] = value
    field = table.schema.field("measured_us")
    bad = tmp_path / "captured.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("measured_us"), field,
                                    pa.array(times, type=field.type)), bad)
    clear_error(["validate", str(bad), "--hw", "h200-sxm", "--no-cache"], capsys, str(bad), "row 3",
                "'measured_us'", "expected a finite time")
