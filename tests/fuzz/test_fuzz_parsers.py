"""The parsers of every user file under random input: measurement CSVs (validate/calibrate --against),
request-trace CSVs (serve --arrivals), sweep specs, hardware YAML and config.json files, with random
columns, types, values and encodings (UTF-8, latin-1, UTF-16, bytes). Whatever the input, a parser
returns or raises one of the project's user errors (mpsim.errors.USER_ERRORS), never anything else.

In CI the run is deterministic (derandomized, EXAMPLES examples per parser, well under a minute). A
longer, random run: `MPSIM_FUZZ_EXAMPLES=20000 python -m pytest tests/fuzz -p no:cacheprovider`
(`make fuzz`); hypothesis prints the smallest input that fails.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsim.errors import USER_ERRORS

EXAMPLES = int(os.environ.get("MPSIM_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize="MPSIM_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module", autouse=True)
def default_limits() -> Iterator[None]:
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("MPSIM_MAX_")}
    yield
    os.environ.update(saved)


def only_user_errors(parse: Callable[[], Any]) -> None:
    with contextlib.suppress(*USER_ERRORS):  # anything else fails the test with the input that made it
        parse()


# ---- values and encodings ----------------------------------------------------------------------

NUMBERS = st.one_of(
    st.integers(-3, 70_000), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 16, 128, 4096, 10**11]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, 1.0, 256.7, -1.5, 1e308]),
)
WORDS = st.sampled_from([
    "", " ", "nan", "inf", "-inf", "NaN", "1e11", "0x10", "1_000", "true", "null", "gemm", "attention",
    "rmsnorm", "rope", "silu_mul", "add", "fp16", "bf16", "int4-group", "int3-group", "int7-group",
    "anyprec", "kernel", "graph", "eager", "trt-profiler", "kv_append", "rope+kv_append", "w4", "ap4-3",
    "tiny", "vicuna-7b", "h200-sxm", "npu-llm", "sim", "roofline", "poisson", "gamma:2", "uniform:1:inf",
    "lognormal:64:1", "a,b", '"quoted', "line\nbreak", "\x00", "é", "\ufeff",
])
TEXT = st.text(max_size=12)
CELL = st.one_of(NUMBERS.map(str), WORDS, TEXT)


def encode(text: str, how: str, noise: bytes) -> bytes:
    if how == "bytes":
        return noise
    if how == "truncated":
        return text.encode()[: max(1, len(text) // 2)]
    return text.encode(how, errors="replace")


ENCODING = st.sampled_from(["utf-8", "utf-8", "utf-8", "latin-1", "utf-16", "bytes", "truncated"])


@st.composite
def csv_bytes(draw: st.DrawFn, columns: tuple[str, ...]) -> bytes:
    """A CSV with some of `columns` (and strangers), ragged rows, any cells, in any encoding."""
    header = draw(st.lists(st.one_of(st.sampled_from(columns), TEXT), min_size=0, max_size=len(columns) + 2))
    if draw(st.booleans()):
        header = list(columns)
    rows = draw(st.lists(st.lists(CELL, min_size=0, max_size=len(header) + 1), max_size=5))
    sep = draw(st.sampled_from([",", ",", ";", "\t"]))
    quote = draw(st.booleans())

    def line(cells: list[str]) -> str:
        return sep.join(f'"{c}"' if quote else c for c in cells)

    text = "\n".join(line(r) for r in [header, *rows]) + draw(st.sampled_from(["\n", "", "\r\n"]))
    return encode(text, draw(ENCODING), draw(st.binary(max_size=200)))


# ---- the CSV parsers -----------------------------------------------------------------------------

@FUZZ
@given(data=st.data())
def test_measurement_csv(folder: Path, data: st.DataObject) -> None:
    from mpsim.analysis.validation.measured import GENERIC_COLUMNS
    from mpsim.analysis.validation.sources import VIDUR_OPS, VIDUR_SIZES, VIDUR_STAT, read_measurements

    vidur = VIDUR_SIZES + tuple(f"time_stats.{op}.{VIDUR_STAT}" for op in VIDUR_OPS)
    columns = data.draw(st.sampled_from([GENERIC_COLUMNS, vidur]))
    path = folder / "measured.csv"
    path.write_bytes(data.draw(csv_bytes(columns)))
    only_user_errors(lambda: read_measurements(path))


@FUZZ
@given(data=st.data())
def test_request_trace_csv(folder: Path, data: st.DataObject) -> None:
    from mpsim.models import get_model
    from mpsim.serve.arrivals import CSV_COLUMNS, CSV_OPTIONAL, read_arrivals_csv

    path = folder / "arrivals.csv"
    path.write_bytes(data.draw(csv_bytes(CSV_COLUMNS + CSV_OPTIONAL)))
    limit = data.draw(st.one_of(st.none(), st.integers(1, 4)))
    allow = data.draw(st.booleans())
    only_user_errors(lambda: read_arrivals_csv(path, get_model("tiny"), allow, limit))


# ---- YAML and JSON documents ---------------------------------------------------------------------

LEAF = st.one_of(st.none(), st.booleans(), NUMBERS, WORDS, TEXT)
VALUE = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(WORDS, TEXT), inner, max_size=3)), max_leaves=8)


def document(data: st.DataObject, tree: Any, dump: Callable[[Any], str]) -> bytes:
    """`tree` dumped, then maybe damaged: a key line repeated, cut short, or re-encoded."""
    try:
        text = dump(tree)
    except (ValueError, TypeError, OverflowError):  # a value the dumper cannot write (JSON: NaN keys...)
        text = str(tree)
    lines = text.splitlines(keepends=True)
    damage = data.draw(st.sampled_from(["none", "none", "repeat", "cut", "encoding"]))
    if damage == "repeat" and lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    elif damage == "cut" and lines:
        lines = lines[: data.draw(st.integers(0, len(lines) - 1))]
    text = "".join(lines)
    how = data.draw(ENCODING) if damage == "encoding" else "utf-8"
    return encode(text, how, data.draw(st.binary(max_size=200)))


def mutate(data: st.DataObject, tree: Any, depth: int = 0) -> Any:
    """A copy of a valid document with a few keys replaced, dropped or added at any depth."""
    if isinstance(tree, dict) and tree:
        out = dict(tree)
        for _ in range(data.draw(st.integers(0, 2))):
            key = data.draw(st.sampled_from(sorted(out, key=str))) if out else None
            action = data.draw(st.sampled_from(["replace", "drop", "add", "descend", "descend"]))
            if action == "replace" and key is not None:
                out[key] = data.draw(VALUE)
            elif action == "drop" and key is not None:
                del out[key]
            elif action == "add":
                out[data.draw(st.one_of(WORDS, TEXT))] = data.draw(VALUE)
            elif key is not None and depth < 4:
                out[key] = mutate(data, out[key], depth + 1)
        return out
    if isinstance(tree, list) and tree:
        i = data.draw(st.integers(0, len(tree) - 1))
        return [*tree[:i], mutate(data, tree[i], depth + 1) if depth < 4 else data.draw(VALUE), *tree[i + 1:]]
    return data.draw(VALUE) if data.draw(st.booleans()) else tree


def yaml_dump(tree: Any) -> str:
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)


SPEC = {"name": "fuzz", "models": ["tiny"], "policies": ["fp16", "w4"], "hardware": ["h200-sxm"],
        "workloads": [{"prompt_len": 8, "gen_len": 4, "batch": 1}], "perf_models": ["roofline"],
        "serve": {"rates": [1.0], "requests": 4, "prompt_len": 8, "gen_len": 4},
        "allow_beyond_context": False}


@FUZZ
@given(data=st.data())
def test_sweep_spec(folder: Path, data: st.DataObject) -> None:
    from mpsim.analysis.sweep.spec import load_spec

    path = folder / "spec.yaml"
    path.write_bytes(document(data, mutate(data, SPEC), yaml_dump))
    only_user_errors(lambda: load_spec(path))


@FUZZ
@given(data=st.data())
def test_hardware_yaml(folder: Path, data: st.DataObject) -> None:
    from mpsim.hw_models.loader import load_hardware

    name = data.draw(st.sampled_from(["h200-sxm", "npu-llm", "npu-edge"]))
    shipped = yaml.safe_load((ROOT / "hw_models" / f"{name}.yaml").read_text())
    path = folder / "hw.yaml"
    path.write_bytes(document(data, mutate(data, shipped), yaml_dump))
    only_user_errors(lambda: load_hardware(str(path)))


@FUZZ
@given(data=st.data())
def test_config_json(folder: Path, data: st.DataObject) -> None:
    from mpsim.models import get_model

    config = json.loads((ROOT / "mpsim" / "data" / "tiny" / "config.json").read_text())
    config["model_type"] = data.draw(st.sampled_from(["llama", "mistral", "qwen2", "phi", "stablelm",
                                                      "gpt2"]))
    path = folder / "model" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(document(data, mutate(data, config), lambda t: json.dumps(t, allow_nan=True)))
    only_user_errors(lambda: get_model(str(path)))
