"""The tiny byte-level Llama shipped in mpsim/data/tiny/: where it lives and how it loads."""

from __future__ import annotations

from pathlib import Path

from mpsim.engine.checkpoint import TextModel, open_folder
from mpsim.engine.tokenizer import ByteTokenizer
from mpsim.engine.weights import ModelParams, load_hf_weights
from mpsim.errors import MpsimInputError
from mpsim.models import PRESETS, TINY_NAME, ModelSpec, get_model, tiny_config_path


def tiny_dir() -> Path:
    return tiny_config_path().parent


def inside_package(path: str | Path) -> bool:
    """Whether `path` lies inside the installed mpsim package (the shipped tiny model's folder among
    others): commands write there only when --out names it, never by default."""
    package = Path(__file__).resolve().parents[1]  # mpsim/tiny/shipped.py -> mpsim/
    return Path(path).resolve().is_relative_to(package)


def tiny_spec() -> ModelSpec:
    return get_model(TINY_NAME)


def load_tiny() -> tuple[ModelSpec, ModelParams]:
    spec = tiny_spec()
    return spec, load_hf_weights(tiny_dir(), spec)


def resolve_model(name: str, weights: str | None) -> tuple[ModelSpec, str | Path | None]:
    """`--model tiny` means the shipped model and its weights; anything else is a spec name/path."""
    if name == TINY_NAME:
        return tiny_spec(), weights or tiny_dir()
    if weights is None and Path(name).is_dir() and any(Path(name).glob("*.safetensors")):
        weights = name  # a model folder: its own weights
    return get_model(name), weights


def open_text_model(name: str) -> TextModel:
    """`tiny` (the shipped byte-level model, byte tokenizer) or a model folder (HF or quantized)."""
    if name == TINY_NAME:
        spec = tiny_spec()
        return TextModel(TINY_NAME, spec, ByteTokenizer(), tiny_dir(), tiny_dir())
    if name in PRESETS:
        raise MpsimInputError(f"--model {name}: a preset has shapes but no weights or tokenizer; give the "
                              "model's folder (config.json, *.safetensors, tokenizer) or `tiny`")
    return open_folder(name)
