"""The learned (prompt-adaptive) scheduler, PMPD's design: once per prompt, a small classifier reads
the last decoder layer's K/V cache after prefill and picks the switch segment.

    K, V (B, kv_heads, T, D)  --mean over heads-->  (B, T, D) each
    learned-query attention pooling, Q queries q_j: a_j = softmax(K q_j / sqrt(D)) over the prompt
    (dropout on a_j while training), pooled_j = a_j V; concatenated (B, Q D)
    LayerNorm(Q D) -> Linear(Q D, H) -> ReLU -> Linear(H, N + 1) -> class i: switch after S = round(i L / N)

As in PMPD's KVCacheClassifier, Q is the number of KV heads and H = Q D by default.
The classes are fractions of the generation length (class N = never switch), so one classifier
serves any L. Weights are safetensors beside a JSON config (nothing unpickled); both are validated
on load. Training lives in mpsim/schedulers/train.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mpsim.engine.scheduler import Ladder, StepState, SwitchScheduler
from mpsim.errors import MpsimInputError
from mpsim.traces.atomic import atomic_write, write_text_atomic

FORMAT = "mpsim-learned-scheduler"
VERSION = 1
WEIGHTS_FILE, CONFIG_FILE = "scheduler_learned.safetensors", "scheduler_learned.json"


@dataclass(frozen=True)
class ClassifierConfig:
    head_dim: int
    segments: int = 3   # N: classes are 0, 1/N, ..., 1 of the generation length
    hidden: int = 64
    queries: int = 1
    dropout: float = 0.1  # on the attention weights, training only

    @property
    def classes(self) -> int:
        return self.segments + 1


class KVClassifier(nn.Module):
    """Learned-query attention pooling over the prompt's head-averaged K/V, LayerNorm, 2-layer MLP."""

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        width = cfg.queries * cfg.head_dim
        self.query = nn.Parameter(torch.zeros(cfg.queries, cfg.head_dim))
        self.drop = nn.Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, cfg.hidden)
        self.fc2 = nn.Linear(cfg.hidden, cfg.classes)

    def forward(self, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """k, v: (B, T, D) float; mask: (B, T) bool, True on prompt tokens -> (B, classes) logits."""
        scores = (k @ self.query.T).transpose(1, 2) / math.sqrt(self.cfg.head_dim)  # (B, Q, T)
        weights = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
        pooled = (self.drop(weights) @ v).flatten(1)  # (B, Q D)
        return self.fc2(torch.relu(self.fc1(self.norm(pooled))))


def kv_features(last_kv: tuple[torch.Tensor, torch.Tensor],
                prompt_lens: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, kv_heads, T, D) K and V -> head-averaged fp32 (B, T, D) each, and the (B, T) prompt mask."""
    k, v = last_kv
    if k.dim() != 4 or k.shape != v.shape:
        raise ValueError(f"last_kv: expected two (B, kv_heads, T, D) tensors, got {tuple(k.shape)} "
                         f"and {tuple(v.shape)}")
    b, _, t, _ = k.shape
    if len(prompt_lens) != b or not all(1 <= n <= t for n in prompt_lens):
        raise ValueError(f"prompt_lens: expected {b} lengths in 1..{t}, got {prompt_lens}")
    mask = torch.arange(t)[None, :] < torch.tensor(prompt_lens)[:, None]
    return k.float().mean(dim=1).cpu(), v.float().mean(dim=1).cpu(), mask


def class_to_switch(cls: int, segments: int, gen_len: int) -> int:
    return round(cls * gen_len / segments)


@dataclass
class LearnedSwitch(SwitchScheduler):
    """Per prompt, the classifier's argmax class becomes the sequence's switch point."""

    model: KVClassifier | None = None
    gen_len: int = 0
    chosen: list[int] = field(default_factory=list)  # the last generation's classes

    def choose(self, state: StepState) -> list[int]:
        if self.model is None or state.last_kv is None:
            raise ValueError("LearnedSwitch needs a classifier and the prefill K/V (StepState.last_kv)")
        k, v, mask = kv_features(state.last_kv, state.prompt_lens)
        with torch.no_grad():
            self.chosen = self.model(k, v, mask).argmax(dim=-1).tolist()
        seg = self.model.cfg.segments
        return [class_to_switch(c, seg, self.gen_len) for c in self.chosen]


def save_classifier(model: KVClassifier, folder: str | Path, info: dict[str, Any]) -> list[Path]:
    """Write the weights (safetensors, fp32) and the JSON config + training record beside them."""
    from safetensors.torch import save_file

    folder = Path(folder)
    weights, config = folder / WEIGHTS_FILE, folder / CONFIG_FILE
    state = {k: t.detach().float().contiguous() for k, t in model.state_dict().items()}
    atomic_write(weights, lambda tmp: save_file(state, tmp))
    record = {"format": FORMAT, "version": VERSION, "classifier": asdict(model.cfg)} | info
    write_text_atomic(json.dumps(record, indent=2, sort_keys=True) + "\n", config)
    return [weights, config]


def load_classifier(folder: str | Path) -> tuple[KVClassifier, dict[str, Any]]:
    """Read and validate a saved classifier; errors name the file and what is wrong."""
    folder = Path(folder)
    config = folder / CONFIG_FILE
    if not config.exists():
        raise MpsimInputError(f"{config}: no learned-scheduler config; run `mpsim train-scheduler`")
    try:
        record = json.loads(config.read_text())
    except json.JSONDecodeError as exc:
        raise MpsimInputError(f"{config}: not valid JSON ({exc})") from None
    if record.get("format") != FORMAT or record.get("version") != VERSION:
        raise MpsimInputError(f"{config}: expected format {FORMAT!r} version {VERSION}, got "
                              f"{record.get('format')!r} version {record.get('version')!r}")
    cfg = _config(config, record.get("classifier"))
    model = KVClassifier(cfg)
    _load_weights(model, folder / WEIGHTS_FILE)
    model.eval()
    return model, record


def _config(path: Path, raw: object) -> ClassifierConfig:
    ints = {"head_dim", "segments", "hidden", "queries"}
    keys = sorted(ints | {"dropout"})
    if not isinstance(raw, dict) or sorted(raw) != keys:
        raise MpsimInputError(f"{path}: 'classifier' must hold exactly {keys}, got {raw!r}")
    if not all(isinstance(raw[k], int) and raw[k] > 0 for k in ints):
        raise MpsimInputError(f"{path}: 'classifier' {sorted(ints)} must be positive integers, got {raw!r}")
    if not isinstance(raw["dropout"], (int, float)) or not 0 <= raw["dropout"] < 1:
        raise MpsimInputError(f"{path}: 'classifier' dropout must be in [0, 1), got {raw['dropout']!r}")
    return ClassifierConfig(**raw)


def _load_weights(model: KVClassifier, path: Path) -> None:
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types
        raise MpsimInputError(f"{path}: not a readable safetensors file ({exc})") from None
    want = {k: tuple(t.shape) for k, t in model.state_dict().items()}
    got = {k: tuple(t.shape) for k, t in tensors.items()}
    if want != got:
        raise MpsimInputError(f"{path}: tensors {got} do not match the config's classifier {want}")
    model.load_state_dict({k: t.float() for k, t in tensors.items()})


def learned_scheduler(model: KVClassifier, ladder: Ladder, gen_len: int) -> LearnedSwitch:
    return LearnedSwitch(ladder, name="learned", model=model, gen_len=gen_len)
