"""The tiny byte-level Llama shipped in mpsim/data/tiny/: where it lives and how it loads."""

from __future__ import annotations

from pathlib import Path

from mpsim.engine.weights import ModelParams, load_hf_weights
from mpsim.models import TINY_NAME, ModelSpec, get_model, tiny_config_path


def tiny_dir() -> Path:
    return tiny_config_path().parent


def tiny_spec() -> ModelSpec:
    return get_model(TINY_NAME)


def load_tiny() -> tuple[ModelSpec, ModelParams]:
    spec = tiny_spec()
    return spec, load_hf_weights(tiny_dir(), spec)


def resolve_model(name: str, weights: str | None) -> tuple[ModelSpec, str | Path | None]:
    """`--model tiny` means the shipped model and its weights; anything else is a spec name/path."""
    if name == TINY_NAME:
        return tiny_spec(), weights or tiny_dir()
    return get_model(name), weights
