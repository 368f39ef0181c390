"""The tiny byte-level Llama shipped in mpsim/data/tiny/: where it lives and how it loads."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from mpsim.engine.weights import ModelParams, load_hf_weights
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec, from_hf_config

TINY_NAME = "tiny"


def tiny_dir() -> Path:
    return Path(str(files("mpsim") / "data" / "tiny"))


def tiny_spec() -> ModelSpec:
    path = tiny_dir() / "config.json"
    if not path.exists():
        raise MpsimInputError(f"{path}: the tiny model is not there; run `mpsim train-tiny` to make it")
    return from_hf_config(path)


def load_tiny() -> tuple[ModelSpec, ModelParams]:
    spec = tiny_spec()
    return spec, load_hf_weights(tiny_dir(), spec)


def resolve_model(name: str, weights: str | None) -> tuple[ModelSpec, str | Path | None]:
    """`--model tiny` means the shipped model and its weights; anything else is a spec name/path."""
    from mpsim.models import get_model

    if name == TINY_NAME:
        return tiny_spec(), weights or tiny_dir()
    return get_model(name), weights
