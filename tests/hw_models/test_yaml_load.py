"""One YAML loader for every file mpsim reads: safe, and a key given twice is an error with its line
(PyYAML keeps the last silently: a sweep spec listing `policies` twice swept only the second list)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bad_input_cases import clear_error, hw_yaml, write

from mpsim.hw_models.yaml_load import safe_yaml


@pytest.mark.parametrize(("text", "line"), [
    ("a: 1\nb: 2\na: 3\n", 3),
    ("outer:\n  x: 1\n  x: 1\n", 3),
    ("list:\n  - {k: 1, k: 2}\n", 2),
    ("1: a\n1: b\n", 2),
])
def test_a_duplicate_key_is_an_error_at_its_line(text: str, line: int) -> None:
    with pytest.raises(yaml.YAMLError) as info:
        safe_yaml(text)
    assert "duplicate key" in str(info.value)
    assert info.value.problem_mark.line + 1 == line  # type: ignore[attr-defined]


def test_plain_yaml_and_merges_still_load() -> None:
    assert safe_yaml("a: 1\nb: [1, 2]\nc: {d: e}\n") == {"a": 1, "b": [1, 2], "c": {"d": "e"}}
    merged = safe_yaml("base: &b {p: 1, q: 2}\nmine:\n  <<: *b\n  p: 5\n")
    assert merged["mine"] == {"p": 5, "q": 2}  # a merge may be overridden: not a duplicate
    with pytest.raises(yaml.YAMLError):
        safe_yaml("!!python/object/apply:os.system ['true']\n")  # still safe


def test_every_reader_refuses_a_duplicate_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path / "spec.yaml", "name: d\nmodels: [tiny]\npolicies: [fp16]\npolicies: [w4]\n"
                 "hardware: [h200-sxm]\nworkloads: [{prompt_len: 8, gen_len: 2}]\n")
    clear_error(["sweep", spec, "--out", str(tmp_path / "s")], capsys, spec, "line 4",
                "duplicate key 'policies'")
    hw = hw_yaml(tmp_path / "hw.yaml", "kind: gpu\n", "kind: gpu\nkind: gpu\n")
    clear_error(["hw", "show", hw], capsys, hw, "duplicate key 'kind'")
    cal = write(tmp_path / "cal.yaml", "kind: mpsim-calibration\nkind: mpsim-calibration\n")
    rows = write(tmp_path / "m.csv", "op,m,n,k,w_format,w_bits,measured_us,protocol\n"
                 "gemm,16,256,256,fp16,16,10.0,kernel\n")
    clear_error(["validate", "--against", rows, "--hw", "h200-sxm", "--calibration", cal], capsys, cal,
                "line 2", "duplicate key 'kind'")


def test_protocols_yaml_refuses_a_duplicate_key() -> None:
    from mpsim.errors import MpsimInputError
    from mpsim.sim.protocols import parse_protocols

    with pytest.raises(MpsimInputError, match=r"protocols\.yaml: line 2, column 1: invalid YAML: duplicate"):
        parse_protocols("protocols: {}\nprotocols: {}\n", "protocols.yaml")
