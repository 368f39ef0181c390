"""Model weights as the engine needs them: fp16 numpy arrays keyed by role, from HF names or random.

`load_hf_weights` reads a Hugging Face style folder (config.json + *.safetensors) of the Llama,
Mistral, Qwen2, Phi and StableLM families and fuses Q/K/V (and gate/up) along the output axis, the
way the engine launches them. `dummy_weights` makes random weights at the real shapes (for timing).
Nothing is unpickled: safetensors only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import numpy as np

from mpsim.engine.mapped import MappedTensors
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec


@dataclass(frozen=True)
class Linear:
    weight: np.ndarray  # fp16 (N, K)
    bias: np.ndarray | None


@dataclass(frozen=True)
class Norm:
    weight: np.ndarray  # fp16 (H,)
    bias: np.ndarray | None  # LayerNorm only


@dataclass(frozen=True)
class LayerParams:
    attn_norm: Norm
    mlp_norm: Norm | None  # None for a parallel attention+MLP block (one shared norm)
    linears: dict[str, Linear]  # qkv, o, gate_up|fc1, down|fc2


@dataclass(frozen=True)
class ModelParams:
    spec: ModelSpec
    embed: np.ndarray  # fp16 (V, H)
    layers: Sequence[LayerParams]  # a list, or LazyLayers read from mapped files when indexed
    final_norm: Norm
    lm_head: Linear  # shares `embed` when the model ties embeddings


def hf_names(spec: ModelSpec) -> dict[str, str]:
    """Role -> HF name pattern ({i} = layer) for the families mpsim reads."""
    phi = spec.mlp == "gelu"
    return {
        "embed": "model.embed_tokens.weight",
        "attn_norm": "model.layers.{i}.input_layernorm",
        "mlp_norm": "model.layers.{i}.post_attention_layernorm",
        "q": "model.layers.{i}.self_attn.q_proj", "k": "model.layers.{i}.self_attn.k_proj",
        "v": "model.layers.{i}.self_attn.v_proj",
        "o": "model.layers.{i}.self_attn." + ("dense" if phi else "o_proj"),
        "gate": "model.layers.{i}.mlp.gate_proj", "up": "model.layers.{i}.mlp.up_proj",
        "down": "model.layers.{i}.mlp.down_proj",
        "fc1": "model.layers.{i}.mlp.fc1", "fc2": "model.layers.{i}.mlp.fc2",
        "final_norm": "model.final_layernorm" if phi else "model.norm",
        "lm_head": "lm_head",
    }


class _Tensors:
    """Named fp16 tensors of a folder's safetensors files, memory-mapped (mpsim.engine.mapped), with
    errors that name the folder and the key."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.mapped = MappedTensors.folder(folder)

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in self.mapped:
            raise MpsimInputError(f"{self.folder}: missing tensor '{name}' (expected shape {shape})")
        got = self.mapped.infos[name].shape
        if got != shape:
            raise MpsimInputError(f"{self.folder}: tensor '{name}' has shape {got}, expected {shape}")
        return self._read(name)

    def _read(self, name: str) -> np.ndarray:
        return self.mapped.fp16(name)

    def maybe(self, name: str, shape: tuple[int, ...], present: bool) -> np.ndarray | None:
        return self.get(name, shape) if present else None


class _Checker(_Tensors):
    """Checks names and shapes from the headers; returns empty placeholders instead of data."""

    def __init__(self, folder: Path, mapped: MappedTensors) -> None:
        self.folder, self.mapped = folder, mapped

    def _read(self, name: str) -> np.ndarray:
        return np.empty(0, np.float16)


class LazyLayers(Sequence[LayerParams]):
    """Decoder layers read from the mapped files when indexed: Q/K/V and gate/up are fused (copied)
    one layer at a time, so quantizing a model holds one fp16 layer, never a second fp16 model."""

    def __init__(self, t: _Tensors, names: dict[str, str], spec: ModelSpec) -> None:
        self.t, self.names, self.spec = t, names, spec

    def __len__(self) -> int:
        return self.spec.num_layers

    @overload
    def __getitem__(self, i: int) -> LayerParams: ...
    @overload
    def __getitem__(self, i: slice) -> list[LayerParams]: ...

    def __getitem__(self, i: int | slice) -> LayerParams | list[LayerParams]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"layer {i} of {len(self)}")
        return _load_layer(self.t, self.names, self.spec, i % len(self))

    def check(self) -> None:
        """Validate every layer's tensor names and shapes (headers only, no data read)."""
        for i in range(len(self)):
            _load_layer(self.t, self.names, self.spec, i, check_only=True)


def load_hf_weights(folder: str | Path, spec: ModelSpec) -> ModelParams:
    t = _Tensors(Path(folder))
    names, h = hf_names(spec), spec.hidden
    layers = LazyLayers(t, names, spec)
    layers.check()
    embed = t.get(names["embed"], (spec.vocab, h))
    head_w = embed if spec.tied_embeddings else t.get(names["lm_head"] + ".weight", (spec.vocab, h))
    head_b = t.maybe(names["lm_head"] + ".bias", (spec.vocab,), spec.lm_head_bias)
    return ModelParams(spec, embed, layers, _norm(t, names["final_norm"], spec), Linear(head_w, head_b))


def _norm(t: _Tensors, prefix: str, spec: ModelSpec) -> Norm:
    return Norm(t.get(prefix + ".weight", (spec.hidden,)),
                t.maybe(prefix + ".bias", (spec.hidden,), spec.norm == "layer"))


def _linear(t: _Tensors, prefix: str, n: int, k: int, bias: bool) -> Linear:
    return Linear(t.get(prefix + ".weight", (n, k)), t.maybe(prefix + ".bias", (n,), bias))


def _fuse(parts: list[Linear]) -> Linear:
    if any(p.weight.size == 0 for p in parts):  # _Checker's placeholders: nothing to concatenate
        return parts[0]
    weight = np.concatenate([p.weight for p in parts], axis=0)
    biases = [p.bias for p in parts if p.bias is not None]
    return Linear(weight, np.concatenate(biases) if len(biases) == len(parts) else None)


def _load_layer(t: _Tensors, names: dict[str, str], s: ModelSpec, i: int, *,
                check_only: bool = False) -> LayerParams:
    """Layer i's norms and linears; `check_only` validates names and shapes without reading data."""
    def n(role: str) -> str:
        return names[role].format(i=i)

    if check_only:
        t = _Checker(t.folder, t.mapped)

    qkv = _fuse([_linear(t, n("q"), s.q_dim, s.hidden, s.qkv_bias),
                 _linear(t, n("k"), s.kv_dim, s.hidden, s.qkv_bias),
                 _linear(t, n("v"), s.kv_dim, s.hidden, s.qkv_bias)])
    linears = {"qkv": qkv, "o": _linear(t, n("o"), s.hidden, s.q_dim, s.o_bias)}
    if s.mlp == "swiglu":
        linears["gate_up"] = _fuse([_linear(t, n("gate"), s.ffn, s.hidden, s.mlp_bias),
                                    _linear(t, n("up"), s.ffn, s.hidden, s.mlp_bias)])
        linears["down"] = _linear(t, n("down"), s.hidden, s.ffn, s.mlp_bias)
    else:
        linears["fc1"] = _linear(t, n("fc1"), s.ffn, s.hidden, s.mlp_bias)
        linears["fc2"] = _linear(t, n("fc2"), s.hidden, s.ffn, s.mlp_bias)
    mlp_norm = None if s.parallel_attn_mlp else _norm(t, n("mlp_norm"), s)
    return LayerParams(_norm(t, n("attn_norm"), s), mlp_norm, linears)


def dummy_weights(spec: ModelSpec, seed: int = 0) -> ModelParams:
    """Random fp16 weights at the model's real shapes (std 0.02; norms 1, biases 0)."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    def norm() -> Norm:
        ones = np.ones(spec.hidden, np.float16)
        return Norm(ones, np.zeros(spec.hidden, np.float16) if spec.norm == "layer" else None)

    def lin(n: int, k: int, bias: bool) -> Linear:
        return Linear(w(n, k), np.zeros(n, np.float16) if bias else None)

    layers = []
    for _ in range(spec.num_layers):
        linears = {mod: lin(n, k, b) for mod, (n, k, b) in spec.linear_shapes().items()}
        layers.append(LayerParams(norm(), None if spec.parallel_attn_mlp else norm(), linears))
    embed = w(spec.vocab, spec.hidden)
    head = Linear(embed, None) if spec.tied_embeddings else lin(spec.vocab, spec.hidden, spec.lm_head_bias)
    return ModelParams(spec, embed, layers, norm(), head)
