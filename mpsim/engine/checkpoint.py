"""A model that generates text: spec, tokenizer and weights, from an HF folder or a quantized one.

`open_folder(DIR)` takes either kind:
- an HF folder (config.json + *.safetensors + tokenizer): fp16 weights, memory-mapped, quantized at
  load for any policy;
- a quantized folder (`mpsim quantize`): the stored format is read directly and is the default
  policy; a policy needing more bits than it stores is an error; fp16 (the baseline of `quality`
  and `evaluate`) comes from the source folder its header names, while that folder exists.
The tiny byte-level model opens through mpsim.tiny.shipped.open_text_model; a byte-level folder written
by `mpsim train-tiny --out DIR` opens here (its config.json says its tokens are bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mpsim.engine.backends import Backend
from mpsim.engine.model import Decoder
from mpsim.engine.quantize import QuantizedLayer
from mpsim.engine.quantized import HEADER, QuantInfo, is_quantized, read_header
from mpsim.engine.tokenizer import ByteTokenizer, Tokenizer, load_tokenizer
from mpsim.engine.weights import ModelParams, load_hf_weights
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec, from_hf_config
from mpsim.policy import Policy


@dataclass
class TextModel:
    name: str
    spec: ModelSpec
    tokenizer: Tokenizer
    folder: Path | None = None       # where config.json lives
    fp16_folder: Path | None = None  # fp16 safetensors: the folder itself, or a quantized one's source
    quant: QuantInfo | None = None
    _params: ModelParams | None = field(default=None, repr=False)
    _quantized: dict[str, tuple[ModelParams, list[QuantizedLayer]]] = field(default_factory=dict, repr=False)

    @property
    def byte_level(self) -> bool:
        """Tokens are bytes (the tiny model, or a folder from `mpsim train-tiny`): the held-out stdlib
        windows are its default prompts."""
        return isinstance(self.tokenizer, ByteTokenizer)

    @property
    def default_policy(self) -> str:
        return self.quant.policy if self.quant is not None else "fp16"

    def params(self) -> ModelParams:
        """fp16 weights (memory-mapped, layers read when used)."""
        if self._params is None:
            if self.fp16_folder is None or not self.fp16_folder.exists():
                where = self.quant.folder / HEADER if self.quant else self.folder
                raise MpsimInputError(f"{where}: fp16 weights are needed (the fp16 policy or baseline) but "
                                      f"the original checkpoint {self.fp16_folder} is not there")
            self._params = load_hf_weights(self.fp16_folder, self.spec)
        return self._params

    def check_policy(self, policy: Policy) -> None:
        if self.quant is not None and not (policy.family == "fp16" and self.fp16_folder is not None):
            self.quant.check_policy(policy)

    def decoder(self, policy: Policy, backend: Backend) -> Decoder:
        """A decoder under `policy`: read from the quantized folder when it stores the policy's
        weights, else quantized at load from the fp16 weights."""
        self.check_policy(policy)
        if self.quant is None or policy.family == "fp16":
            return Decoder(self.params(), policy, backend)
        from mpsim.engine.quantize_checkpoint import load_quantized

        key = str(backend.device)
        if key not in self._quantized:
            self._quantized[key] = load_quantized(self.quant, self.spec, backend.device)
        params, layers = self._quantized[key]
        return Decoder(params, policy, backend, quantized=layers)

    def context_limit(self) -> int | None:
        return context_limit(self.spec, self.folder)


def context_limit(spec: ModelSpec, folder: Path | None) -> int | None:
    """The model's context length: the spec's `max_context_len` (read from config.json's
    `max_position_embeddings` by mpsim.models, the rule mpsim/workload.py applies everywhere)."""
    return spec.max_context_len


def check_context(model: TextModel, prompt_tokens: int, gen_len: int, where: str) -> None:
    """A prompt plus its new tokens must fit the model's context; the error names the prompt's place."""
    limit = model.context_limit()
    if limit is not None and prompt_tokens + gen_len > limit:
        raise MpsimInputError(f"{where}: the prompt is {prompt_tokens} tokens; with {gen_len} new tokens "
                              f"that exceeds {model.name}'s context of {limit} tokens")


def open_folder(folder: str | Path) -> TextModel:
    """An HF folder or a quantized folder, with its tokenizer (an error if it has none)."""
    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise MpsimInputError(f"{folder}: no config.json (expected a Hugging Face model folder or one "
                              "written by `mpsim quantize`)")
    spec = from_hf_config(folder / "config.json")
    tokenizer = load_tokenizer(folder)
    if is_quantized(folder):
        info = read_header(folder)
        source = Path(info.source) if info.source else None
        return TextModel(spec.name, spec, tokenizer, folder, source, info)
    return TextModel(spec.name, spec, tokenizer, folder, folder)
