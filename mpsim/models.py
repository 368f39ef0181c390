"""Model specs: the shapes and architecture details that decide a decoder's launch list.

Presets come from the models' Hugging Face config.json files (the `source` of each); `from_hf_config`
reads a local config.json of the Llama, Mistral, Qwen2, Phi and StableLM families. Each spec carries
its context length (`max_context_len`: the config's `max_position_embeddings`, named with its file in
`context_source`); mpsim/workload.py's `check_context` holds workloads to it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from mpsim import limits
from mpsim.errors import MpsimInputError

NormKind = Literal["rms", "layer"]
MlpKind = Literal["swiglu", "gelu"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    num_layers: int
    hidden: int
    ffn: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab: int
    source: str
    norm: NormKind = "rms"
    mlp: MlpKind = "swiglu"
    rotary_fraction: float = 1.0
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    parallel_attn_mlp: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    tied_embeddings: bool = False
    max_context_len: int | None = None  # tokens a sequence may hold (prompt + new); None: not known
    context_source: str = ""  # where max_context_len comes from (file and key)

    def __post_init__(self) -> None:
        for key in ("num_layers", "hidden", "ffn", "num_heads", "num_kv_heads", "head_dim", "vocab"):
            if getattr(self, key) <= 0:
                raise MpsimInputError(f"model {self.name!r}: {key} must be > 0, got {getattr(self, key)}")
        if self.num_heads % self.num_kv_heads:
            raise MpsimInputError(
                f"model {self.name!r}: num_heads {self.num_heads} is not a multiple of "
                f"num_kv_heads {self.num_kv_heads}"
            )
        if self.max_context_len is not None and self.max_context_len < 1:
            raise MpsimInputError(f"model {self.name!r}: max_context_len must be >= 1, got "
                                  f"{self.max_context_len}")
        if not 0 < self.rotary_fraction <= 1:
            raise MpsimInputError(
                f"model {self.name!r}: rotary_fraction must be in (0, 1], got {self.rotary_fraction}"
            )

    @property
    def rot_dim(self) -> int:
        return int(self.head_dim * self.rotary_fraction)

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def mlp_in_width(self) -> int:
        """Output width of the first MLP GEMM: gate and up fused for SwiGLU, fc1 for GELU."""
        return 2 * self.ffn if self.mlp == "swiglu" else self.ffn

    def linear_shapes(self) -> dict[str, tuple[int, int, bool]]:
        """Decoder-block linears as module -> (N, K, has_bias), y = x @ W.T."""
        return {
            "qkv": (self.q_dim + 2 * self.kv_dim, self.hidden, self.qkv_bias),
            "o": (self.hidden, self.q_dim, self.o_bias),
            "gate_up" if self.mlp == "swiglu" else "fc1": (self.mlp_in_width, self.hidden, self.mlp_bias),
            "down" if self.mlp == "swiglu" else "fc2": (self.hidden, self.ffn, self.mlp_bias),
        }

    def block_params(self) -> int:
        return sum(n * k for n, k, _ in self.linear_shapes().values())

    def param_count(self) -> int:
        """Every parameter of the checkpoint: block linears and their biases, norms (weight, plus bias
        for LayerNorm), embeddings, lm_head (once when tied) and its bias."""
        biases = sum(n for n, _, has_bias in self.linear_shapes().values() if has_bias)
        per_norm = self.hidden * (2 if self.norm == "layer" else 1)
        norms_per_layer = 1 if self.parallel_attn_mlp else 2
        lm_head = 0 if self.tied_embeddings else self.vocab * self.hidden
        lm_head += self.vocab if self.lm_head_bias else 0
        return (self.num_layers * (self.block_params() + biases + norms_per_layer * per_norm)
                + per_norm + self.vocab * self.hidden + lm_head)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


def _context(repo: str, tokens: int) -> dict[str, Any]:
    """A preset's context length: `max_position_embeddings` of its config.json."""
    return {"max_context_len": tokens, "context_source": f"{_hf(repo)} max_position_embeddings"}


def _llama_70b(name: str, repo: str, vocab: int, theta: float, tokens: int) -> ModelSpec:
    """Llama-2-70B and Llama-3-70B: 80 layers, hidden 8192, FFN 28672, GQA 64 query / 8 KV heads."""
    return ModelSpec(name, 80, 8192, 28672, 64, 8, 128, vocab, source=_hf(repo), rope_theta=theta,
                     **_context(repo, tokens))


def _llama2_7b(name: str, repo: str) -> ModelSpec:
    return ModelSpec(name, 32, 4096, 11008, 32, 32, 128, 32000, source=_hf(repo), **_context(repo, 4096))


PRESETS: dict[str, ModelSpec] = {
    "vicuna-7b": _llama2_7b("vicuna-7b", "lmsys/vicuna-7b-v1.5"),
    "llama-2-7b": _llama2_7b("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
    "mobilellama-1.4b": ModelSpec(
        "mobilellama-1.4b", 24, 2048, 5632, 16, 16, 128, 32000,
        source=_hf("mtgv/MobileLLaMA-1.4B-Base"), **_context("mtgv/MobileLLaMA-1.4B-Base", 2048)),
    "stablelm-zephyr-3b": ModelSpec(
        "stablelm-zephyr-3b", 32, 2560, 6912, 32, 32, 80, 50304, source=_hf("stabilityai/stablelm-zephyr-3b"),
        norm="layer", rotary_fraction=0.25, **_context("stabilityai/stablelm-zephyr-3b", 4096)),
    "phi-1.5": ModelSpec(
        "phi-1.5", 24, 2048, 8192, 32, 32, 64, 51200, source=_hf("microsoft/phi-1_5"),
        norm="layer", mlp="gelu", rotary_fraction=0.5, parallel_attn_mlp=True, qkv_bias=True,
        o_bias=True, mlp_bias=True, lm_head_bias=True, **_context("microsoft/phi-1_5", 2048)),
    "llama-3-8b": ModelSpec(
        "llama-3-8b", 32, 4096, 14336, 32, 8, 128, 128256, source=_hf("meta-llama/Meta-Llama-3-8B"),
        rope_theta=500000.0, **_context("meta-llama/Meta-Llama-3-8B", 8192)),
    "qwen2.5-1.5b": ModelSpec(
        "qwen2.5-1.5b", 28, 1536, 8960, 12, 2, 128, 151936, source=_hf("Qwen/Qwen2.5-1.5B"),
        rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=True, tied_embeddings=True,
        **_context("Qwen/Qwen2.5-1.5B", 131072)),
    # Multi-GPU presets (docs/real-models.md#multi-gpu-presets). Llama-3-70B is Meta-Llama-3-70B's
    # config (8k context, no rope_scaling); Llama-3.1-70B differs only in max_position_embeddings
    # (131072) and its rope_scaling, which mpsim does not model (shapes and costs are the same).
    "llama-2-70b": _llama_70b("llama-2-70b", "meta-llama/Llama-2-70b-hf", 32000, 10000.0, 4096),
    "llama-3-70b": _llama_70b("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 128256, 500000.0, 8192),
    # Qwen2.5-32B: QKV bias (no o bias), untied embeddings; its sliding_window is off
    # (use_sliding_window false), so full attention is exact.
    "qwen2.5-32b": ModelSpec(
        "qwen2.5-32b", 64, 5120, 27648, 40, 8, 128, 152064, source=_hf("Qwen/Qwen2.5-32B"),
        rope_theta=1000000.0, norm_eps=1e-5, qkv_bias=True, **_context("Qwen/Qwen2.5-32B", 131072)),
}


TINY_NAME = "tiny"  # the byte-level model shipped in mpsim/data/tiny/ (mpsim.tiny)


def tiny_config_path() -> Path:
    return Path(str(resources.files("mpsim") / "data" / "tiny" / "config.json"))


def get_model(name_or_path: str) -> ModelSpec:
    """A preset by name, "tiny" (the shipped byte-level model), or a local HF config.json (a file,
    or a folder holding one)."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    if name_or_path == TINY_NAME:
        path = tiny_config_path()
        if not path.exists():
            raise MpsimInputError(f"{path}: the tiny model is not there; run `mpsim train-tiny` to make it")
        shipped = "mpsim/data/tiny/config.json"  # not the checkout's path: traces and keys stay portable
        return replace(from_hf_config(path), source=f"{shipped} (shipped with mpsim)",
                       context_source=f"{shipped} max_position_embeddings")
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" and path.exists():
        return from_hf_config(path)
    raise MpsimInputError(
        f"unknown model {name_or_path!r}: expected a preset ({', '.join(PRESETS)}), {TINY_NAME!r} "
        "or the path of a Hugging Face config.json"
    )


_HF_FAMILIES = ("llama", "mistral", "qwen2", "phi", "stablelm")


def from_hf_config(path: str | Path) -> ModelSpec:
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise MpsimInputError(f"{path}: cannot read a JSON config ({exc})") from None
    if not isinstance(cfg, dict):
        raise MpsimInputError(f"{path}: expected a JSON object")
    family = cfg.get("model_type")
    if family not in _HF_FAMILIES:
        raise MpsimInputError(
            f"{path}: model_type {family!r} is not supported; expected one of {_HF_FAMILIES}"
        )
    return _spec_from_hf(cfg, family, path)


def _whole(cfg: dict[str, Any], key: str, path: Path, default: int | None = None) -> int:
    """A size from config.json: a whole number >= 1 within the stated limits (mpsim/limits.py);
    `default` when the key is absent or null, or an error when there is none."""
    value = cfg.get(key)
    if value is None:
        if default is None:
            raise MpsimInputError(f"{path}: {key}: missing or null; expected a whole number >= 1")
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or not float(value).is_integer() or value < 1:
        raise MpsimInputError(f"{path}: {key}: expected a whole number >= 1, got {value!r}")
    limit = limits.LAYERS if key == "num_hidden_layers" else limits.SHAPE_DIM
    limit.check(int(value), f"{path}: {key}")
    return int(value)


def _real(cfg: dict[str, Any], key: str, path: Path, default: float, high: float = math.inf) -> float:
    """A number in (0, high] from config.json (`default` when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= high:
        bound = f"(0, {high:g}]" if high < math.inf else "> 0"
        raise MpsimInputError(f"{path}: {key}: expected a number {bound}, got {value!r}")
    return float(value)


def _flag(cfg: dict[str, Any], key: str, path: Path) -> bool:
    value = cfg.get(key, False)
    if value is not None and not isinstance(value, bool):
        raise MpsimInputError(f"{path}: {key}: expected true or false, got {value!r}")
    return bool(value)


def _heads(cfg: dict[str, Any], path: Path) -> tuple[int, int, int]:
    """Query heads, KV heads and head size, checked against each other and hidden_size."""
    heads, hidden = _whole(cfg, "num_attention_heads", path), _whole(cfg, "hidden_size", path)
    kv_heads = _whole(cfg, "num_key_value_heads", path, heads)
    if heads % kv_heads:
        raise MpsimInputError(f"{path}: num_key_value_heads: {kv_heads} does not divide "
                              f"num_attention_heads {heads}")
    if cfg.get("head_dim") is None and hidden % heads:
        raise MpsimInputError(f"{path}: hidden_size: {hidden} is not a multiple of num_attention_heads "
                              f"{heads} (and there is no head_dim)")
    return heads, kv_heads, _whole(cfg, "head_dim", path, hidden // heads)


def _spec_from_hf(cfg: dict[str, Any], family: str, path: Path) -> ModelSpec:
    heads, kv_heads, head_dim = _heads(cfg, path)
    phi, stablelm = family == "phi", family == "stablelm"
    bias = _flag(cfg, "attention_bias", path)
    eps_key = "rms_norm_eps" if cfg.get("rms_norm_eps") is not None else "layer_norm_eps"
    return ModelSpec(
        name=str(cfg.get("_name_or_path") or path.parent.name),
        num_layers=_whole(cfg, "num_hidden_layers", path),
        hidden=_whole(cfg, "hidden_size", path),
        ffn=_whole(cfg, "intermediate_size", path),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=_whole(cfg, "vocab_size", path),
        source=str(path),
        norm="layer" if phi or stablelm else "rms",
        mlp="gelu" if phi else "swiglu",
        rotary_fraction=_real(cfg, "partial_rotary_factor", path, 1.0, high=1.0),
        rope_theta=_real(cfg, "rope_theta", path, 10000.0),
        norm_eps=_real(cfg, eps_key, path, 1e-5),
        parallel_attn_mlp=phi or _flag(cfg, "use_parallel_residual", path),
        qkv_bias=phi or family == "qwen2" or _flag(cfg, "use_qkv_bias", path) or bias,
        o_bias=phi or bias,
        mlp_bias=phi or _flag(cfg, "mlp_bias", path),
        lm_head_bias=phi,
        tied_embeddings=_flag(cfg, "tie_word_embeddings", path),
        **_hf_context(cfg, path),
    )


# Where HF config families keep the context length, in the order they are looked for.
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def _hf_context(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    for key in _CONTEXT_KEYS:
        value = cfg.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MpsimInputError(f"{path}: {key} must be a positive integer, got {value!r}")
            return {"max_context_len": value, "context_source": f"{path} {key}"}
    return {}
