"""The model's context length, and the one check every request passes against it.

`context_length` reads `spec.max_context_len` when the model spec carries it (the speed issue adds it
to ModelSpec, with its own check and `--allow-beyond-context`; this function is the one place to
rewire to that rule), else the preset table below: `max_position_embeddings` of each preset's
config.json (docs/sources.md), except Qwen2.5-1.5B, whose model card gives 32,768 tokens of context.
A model in neither place has no known limit and is not checked.
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec

CONTEXT_LENGTHS: dict[str, int] = {
    "vicuna-7b": 4096,           # lmsys/vicuna-7b-v1.5 config.json
    "llama-2-7b": 4096,          # meta-llama/Llama-2-7b-hf config.json
    "mobilellama-1.4b": 2048,    # mtgv/MobileLLaMA-1.4B-Base config.json
    "stablelm-zephyr-3b": 4096,  # stabilityai/stablelm-zephyr-3b config.json
    "phi-1.5": 2048,             # microsoft/phi-1_5 config.json
    "llama-3-8b": 8192,          # meta-llama/Meta-Llama-3-8B config.json
    "qwen2.5-1.5b": 32768,       # Qwen/Qwen2.5-1.5B model card ("context length: full 32,768 tokens")
}


def context_length(spec: ModelSpec) -> int | None:
    given = getattr(spec, "max_context_len", None)
    return int(given) if given else CONTEXT_LENGTHS.get(spec.name)


def check_context(spec: ModelSpec, prompt_len: int, gen_len: int, allow_beyond: bool = False,
                  where: str = "") -> None:
    """A request's prompt plus its new tokens must fit the model's context (unless allowed beyond)."""
    limit = context_length(spec)
    if allow_beyond or limit is None or prompt_len + gen_len <= limit:
        return
    place = f"{where}: " if where else ""
    raise MpsimInputError(
        f"{place}prompt_len {prompt_len} + gen_len {gen_len} = {prompt_len + gen_len} tokens exceeds "
        f"{spec.name}'s context of {limit} tokens (--allow-beyond-context to simulate it anyway)")
