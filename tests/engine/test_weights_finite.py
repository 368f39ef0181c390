"""NaN or infinite weights are one error naming the file, tensor and index (they failed deep inside,
in a kernel's or the sampler's check: `logits: row 0 contains nan`, `w: contains inf or nan`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from bad_input_cases import TINY_CONFIG, clear_error

from mpsim.engine.mapped import MappedTensors, write_safetensors

TENSOR = "model.layers.1.self_attn.q_proj.weight"


@pytest.fixture
def nan_model(tmp_path: Path) -> Path:
    folder = tmp_path / "nan-model"
    folder.mkdir()
    shutil.copy(TINY_CONFIG, folder / "config.json")
    shipped = MappedTensors.folder(TINY_CONFIG.parent)
    tensors = {name: np.array(shipped.raw(name)) for name in shipped.infos}
    tensors[TENSOR][3, 5] = np.nan
    write_safetensors(folder / "model.safetensors", tensors)
    return folder


@pytest.mark.parametrize("command", ["generate", "quantize"])
def test_a_nan_weight_is_named_by_tensor(command: str, nan_model: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    argv = (["generate", "--model", str(nan_model), "--prompt", "def ", "--gen-len", "2"]
            if command == "generate" else
            ["quantize", "--model", str(nan_model), "--policy", "w4", "--out", str(tmp_path / "q")])
    clear_error(argv, capsys, str(nan_model / "model.safetensors"), f"tensor '{TENSOR}'",
                "value nan at index [3, 5]", "expected finite weights")


@pytest.mark.parametrize(("value", "needle"), [(np.inf, "value inf"), (1e6, "within fp16's range"),
                                               (-np.inf, "value -inf")])
def test_an_fp32_weight_past_fp16_is_named(value: float, needle: str, tmp_path: Path) -> None:
    from mpsim.errors import MpsimInputError

    w = np.ones((4, 8), dtype=np.float32)
    w[2, 7] = value
    write_safetensors(tmp_path / "w.safetensors", {"w": w})
    mapped = MappedTensors.folder(tmp_path)
    with pytest.raises(MpsimInputError, match=r"tensor 'w': value .* at index \[2, 7\]") as info:
        mapped.fp16("w")
    assert needle in str(info.value)
    if np.isfinite(value):
        assert mapped.float32("w")[2, 7] == value  # fp32 holds it: only fp16 cannot
