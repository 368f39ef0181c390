"""The engine's decoder: HF weight loading, agreement with an independent PyTorch Llama, batching
with ragged prompts, EOS stops, and policies that really change the weights read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_cases import SMALL

from mpsim.engine.backends import ReferenceBackend
from mpsim.engine.generate import generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import FixedScheduler
from mpsim.engine.weights import dummy_weights, load_hf_weights
from mpsim.errors import MpsimInputError
from mpsim.models import from_hf_config
from mpsim.policy import parse_policy
from mpsim.tiny.torch_llama import TorchLlama


def _hf_folder(tmp_path: Path) -> tuple[Path, TorchLlama]:
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = TorchLlama(SMALL, max_seq=64)
    for p in model.parameters():  # larger weights than the 0.02 init, so greedy choices are clear
        p.data.normal_(0, 0.08)
    state = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp_path / "model.safetensors"))
    cfg = {"model_type": "llama", "hidden_size": SMALL.hidden, "intermediate_size": SMALL.ffn,
           "num_hidden_layers": SMALL.num_layers, "num_attention_heads": SMALL.num_heads,
           "num_key_value_heads": SMALL.num_kv_heads, "vocab_size": SMALL.vocab, "rms_norm_eps": 1e-5}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path, model


def test_hf_folder_loads_and_fuses(tmp_path: Path) -> None:
    folder, model = _hf_folder(tmp_path)
    spec = from_hf_config(folder / "config.json")
    params = load_hf_weights(folder, spec)
    attn = model.model.layers[0].self_attn
    want = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach().half().numpy()
    assert np.array_equal(params.layers[0].linears["qkv"].weight, want)
    assert params.layers[0].linears["gate_up"].weight.shape == (2 * SMALL.ffn, SMALL.hidden)


def test_engine_agrees_with_pytorch_llama(tmp_path: Path) -> None:
    folder, model = _hf_folder(tmp_path)
    spec = from_hf_config(folder / "config.json")
    decoder = Decoder(load_hf_weights(folder, spec), parse_policy("fp16"), ReferenceBackend())
    prompt = [5, 17, 200, 3, 99, 42, 7, 250]
    out = generate(decoder, [prompt], 6, FixedScheduler(parse_policy("fp16")), keep_logits=True)
    ids = list(prompt)
    model = model.half().float()  # the same fp16-rounded weights, computed in fp32
    with torch.no_grad():
        for step, got in enumerate(out.logits):
            want = model(torch.tensor([ids]))[0, -1]
            err = (got[0].float() - want).abs().max().item()
            assert err < 0.05 * want.abs().max().item(), (step, err)
            assert int(want.argmax()) == out.tokens[0][step]
            ids.append(out.tokens[0][step])


def test_missing_and_misshapen_tensors_are_named(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    folder, _ = _hf_folder(tmp_path)
    spec = from_hf_config(folder / "config.json")
    state = load_file(str(folder / "model.safetensors"))
    del state["model.layers.0.mlp.up_proj.weight"]
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(MpsimInputError, match=r"missing tensor 'model.layers.0.mlp.up_proj.weight'"):
        load_hf_weights(folder, spec)
    state["model.layers.0.mlp.up_proj.weight"] = torch.zeros(3, 3, dtype=torch.float16)
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(MpsimInputError, match=r"has shape \(3, 3\), expected \(256, 128\)"):
        load_hf_weights(folder, spec)
    (folder / "model.safetensors").unlink()
    with pytest.raises(MpsimInputError, match=r"no \*\.safetensors"):
        load_hf_weights(folder, spec)


@pytest.fixture(scope="module")
def decoder() -> Decoder:
    params = dummy_weights(SMALL, seed=3)
    for layer in params.layers:  # sharpen the random model so continuations differ by prompt
        for lin in layer.linears.values():
            lin.weight[...] = (lin.weight.astype(np.float32) * 4).astype(np.float16)
    return Decoder(params, parse_policy("w4+kv8"), ReferenceBackend())


def test_ragged_batch_equals_each_prompt_alone(decoder: Decoder) -> None:
    prompts = [[1, 2, 3, 4, 5, 6, 7], [9, 8], [100, 101, 102, 103]]
    sched = FixedScheduler(parse_policy("w4+kv8"))
    together = generate(decoder, prompts, 6, sched).tokens
    alone = [generate(decoder, [p], 6, sched).tokens[0] for p in prompts]
    assert together == alone


def test_eos_stops_one_sequence_and_not_the_others(decoder: Decoder) -> None:
    prompts = [[1, 2, 3, 4, 5, 6, 7], [9, 8]]
    sched = FixedScheduler(parse_policy("w4+kv8"))
    free = generate(decoder, prompts, 6, sched)
    eos = free.tokens[0][2]
    assert eos not in free.tokens[1][:5], "pick prompts whose continuations differ"
    stopped = generate(decoder, prompts, 6, sched, eos=eos)
    first = free.tokens[0].index(eos)
    assert stopped.tokens[0] == free.tokens[0][: first + 1]
    assert stopped.tokens[1] == free.tokens[1]
    assert len(stopped.decode_bits[0]) == first and len(stopped.decode_bits[1]) == 5


def test_progressive_policy_reads_fewer_planes_later() -> None:
    params = dummy_weights(SMALL, seed=1)
    policy = parse_policy("ap4-4@2-2")
    dec = Decoder(params, policy, ReferenceBackend())
    qkv = dec.layers[0].linears["qkv"]
    assert sorted(qkv.by_bits) == [2, 3, 4]
    assert qkv.at(2).qweight.data_ptr() == qkv.at(4).qweight.data_ptr()  # one parent, fewer planes
    out = generate(dec, [[1, 2, 3]], 5, FixedScheduler(policy))
    assert out.prefill_bits == 4 and out.decode_bits == [[4, 4, 2, 2]]
