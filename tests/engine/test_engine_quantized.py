"""Quantize once: the parallel quantizers are bit for bit the references; weights load memory-mapped
(no second fp16 copy); a quantized folder decodes exactly like quantizing at load; sensitivities."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hf_folder import make_hf_folder

from mpsim.engine.backends import ReferenceBackend
from mpsim.engine.checkpoint import open_folder
from mpsim.engine.generate import generate
from mpsim.engine.mapped import MappedTensors, write_safetensors
from mpsim.engine.parallel_quant import quantize_anyprec_parallel, quantize_group_parallel
from mpsim.engine.quantize_checkpoint import quantize_folder
from mpsim.engine.scheduler import FixedScheduler
from mpsim.engine.weights import load_hf_weights
from mpsim.errors import MpsimInputError
from mpsim.models import from_hf_config
from mpsim.policy import parse_policy
from mpsim.reference.anyprec import quantize_anyprec
from mpsim.reference.group_quant import WHOLE_ROW, quantize_group


@pytest.mark.parametrize("shape", [(5, 40), (67, 300)])
def test_parallel_anyprec_equals_the_reference(shape: tuple[int, int],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import mpsim.engine.parallel_quant as pq

    monkeypatch.setattr(pq, "CHUNK_ELEMENTS", 4000)  # several chunks
    rng = np.random.default_rng(1)
    w = (rng.standard_normal(shape) * 0.05).astype(np.float16)
    sens = rng.random(shape)
    for s in (None, sens):
        done: list[int] = []
        got = quantize_anyprec_parallel(w, 4, 2, s, progress=done.append)
        want = quantize_anyprec(w, 4, 2, s)
        assert np.array_equal(got.qweight, want.qweight) and sum(done) == shape[0]
        assert all(np.array_equal(got.luts[b], want.luts[b]) for b in want.luts)


@pytest.mark.parametrize(("bits", "group"), [(4, 128), (3, 64), (8, WHOLE_ROW)])
def test_parallel_group_equals_the_reference(bits: int, group: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import mpsim.engine.parallel_quant as pq

    monkeypatch.setattr(pq, "CHUNK_ELEMENTS", 3000)
    w = (np.random.default_rng(2).standard_normal((50, 200)) * 0.05).astype(np.float16)
    got, want = quantize_group_parallel(w, bits, group, workers=2), quantize_group(w, bits, group)
    for a in ("qweight", "scales", "zeros"):
        assert np.array_equal(getattr(got, a), getattr(want, a))
    assert got.group_size == want.group_size


def test_safetensors_are_memory_mapped_and_bf16_converts(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    x = torch.randn(4, 6)
    save_file({"h": x.half(), "b": x.bfloat16()}, str(tmp_path / "m.safetensors"))
    t = MappedTensors.folder(tmp_path)
    assert isinstance(t.fp16("h"), np.memmap)  # fp16 is the mapped file itself: no copy
    assert np.array_equal(t.fp16("b"), x.bfloat16().float().half().numpy())
    write_safetensors(tmp_path / "w.safetensors", {"a": np.arange(6, dtype=np.int32).reshape(2, 3)})
    assert MappedTensors([tmp_path / "w.safetensors"]).raw("a").tolist() == [[0, 1, 2], [3, 4, 5]]
    head = b'{"a": {"dtype": "F16"}}'
    (tmp_path / "bad.safetensors").write_bytes(len(head).to_bytes(8, "little") + head)
    with pytest.raises(MpsimInputError, match=r"bad.safetensors: .*tensor 'a'"):
        MappedTensors([tmp_path / "bad.safetensors"])


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_hf_folder(tmp_path_factory.mktemp("q") / "hf", layers=1)


def test_lazy_layers_read_one_layer_at_a_time(hf: Path) -> None:
    params = load_hf_weights(hf, from_hf_config(hf / "config.json"))
    assert isinstance(params.embed, np.memmap) and len(params.layers) == 1
    assert params.layers[0].linears["qkv"].weight.shape == (128, 64)  # fused on access


@pytest.mark.parametrize("policy", ["ap4", "w4g64"])
def test_a_quantized_folder_decodes_like_quantizing_at_load(hf: Path, tmp_path: Path, policy: str) -> None:
    spec = from_hf_config(hf / "config.json")
    quantize_folder(hf, tmp_path / "q", spec, parse_policy(policy))
    model, orig = open_folder(tmp_path / "q"), open_folder(hf)
    read = "ap4-4@2-3" if policy == "ap4" else policy
    assert model.default_policy == policy
    p = parse_policy(read)
    prompts = [orig.tokenizer.encode("The quick brown fox"), orig.tokenizer.encode("def parse(self")]
    a = generate(model.decoder(p, ReferenceBackend()), prompts, 5, FixedScheduler(p), keep_logits=True)
    b = generate(orig.decoder(p, ReferenceBackend()), prompts, 5, FixedScheduler(p), keep_logits=True)
    assert a.tokens == b.tokens and all(torch.equal(x, y) for x, y in zip(a.logits, b.logits, strict=True))
    fp16 = parse_policy("fp16")  # the baseline comes from the header's source folder
    assert generate(model.decoder(fp16, ReferenceBackend()), prompts, 2, FixedScheduler(fp16)).tokens


def test_sensitivity_is_used_and_recorded(hf: Path, tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    spec = from_hf_config(hf / "config.json")
    weights = load_file(str(hf / "model.safetensors"))
    rng = np.random.default_rng(0)
    sens = {k: rng.random(v.shape).astype(np.float32) for k, v in weights.items()
            if "layers" in k and "proj" in k}
    save_file(sens, str(tmp_path / "sens.safetensors"))
    quantize_folder(hf, tmp_path / "s", spec, parse_policy("ap4"), sensitivity=tmp_path / "sens.safetensors")
    quantize_folder(hf, tmp_path / "u", spec, parse_policy("ap4"))
    header = json.loads((tmp_path / "s" / "quantization.json").read_text())
    assert header["sensitivity"]["file"] == "sens.safetensors" and len(header["sensitivity"]["sha256"]) == 64
    a = MappedTensors([tmp_path / "s" / "model.quantized.safetensors"]).raw("layers.0.qkv.lut4")
    b = MappedTensors([tmp_path / "u" / "model.quantized.safetensors"]).raw("layers.0.qkv.lut4")
    assert not np.array_equal(a, b)
    del sens["model.layers.0.mlp.up_proj.weight"]
    save_file(sens, str(tmp_path / "sens.safetensors"))
    with pytest.raises(MpsimInputError, match=r"no tensor 'model.layers.0.mlp.up_proj.weight'"):
        quantize_folder(hf, tmp_path / "s2", spec, parse_policy("ap4"),
                        sensitivity=tmp_path / "sens.safetensors")


def test_a_version_1_folder_is_rejected_by_name(hf: Path, tmp_path: Path) -> None:
    """Version 1 packed group codes LSB first: read with today's pair layout they would be other codes."""
    quantize_folder(hf, tmp_path / "q", from_hf_config(hf / "config.json"), parse_policy("w4g64"))
    header_path = tmp_path / "q" / "quantization.json"
    header = json.loads(header_path.read_text())
    assert header["version"] == 2
    header["version"] = 1
    header_path.write_text(json.dumps(header))
    with pytest.raises(MpsimInputError, match=r"quantization.json: written with format 'mpsim-quantized' "
                                              r"version 1, whose group codes are packed LSB first"):
        open_folder(tmp_path / "q")
