"""`mpsim train-tiny`: train the tiny byte-level Llama shipped in mpsim/data/tiny/.

Reproducible from the command: fixed seed, deterministic data order, one thread count; it writes
config.json (HF Llama format) + model.safetensors (fp16, HF parameter names), the training log
(CSV), the loss curve (PNG) and train_config.json, the run's full TinyConfig: `mpsim train-tiny
--config train_config.json` repeats the run (other sizes are trained the same way from a config
file). A wall-clock limit (`max_minutes`) stops a run early; the step it stopped at is written as
`stop_at`, so the written config repeats the run without depending on the clock. Held-out bits per
byte are measured on stdlib files the training never sees (mpsim.tiny.corpus).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import torch

from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.tiny.corpus import load_corpus
from mpsim.tiny.torch_llama import TorchLlama, bits_per_byte
from mpsim.traces.atomic import atomic_write, check_output, write_figure_atomic, write_text_atomic


@dataclass(frozen=True)
class TinyConfig:
    hidden: int = 256
    layers: int = 3
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 512
    seq_len: int = 128
    batch: int = 16
    steps: int = 600
    lr: float = 2e-3
    warmup: int = 50
    weight_decay: float = 0.05
    eval_every: int = 50
    eval_windows: int = 64
    train_bytes: int = 12_000_000
    seed: int = 0
    threads: int = 2
    max_minutes: float | None = None  # stop after this much training wall time (None: no limit)
    stop_at: int | None = None  # stop after this many steps of the `steps`-long schedule (None: all)
    name: str = "mpsim-tiny-byte"  # the written config.json's _name_or_path

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                if not isinstance(value, str) or not value:
                    _bad(f"name must be a non-empty string, got {value!r}")
            elif value is None and f.name in ("max_minutes", "stop_at"):
                continue
            elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                _bad(f"{f.name} must be a non-negative number, got {value!r}")
            elif f.type in ("int", "int | None") and not isinstance(value, int):
                _bad(f"{f.name} must be an integer, got {value!r}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            _bad(f"hidden {self.hidden} must divide into heads {self.heads}, and heads into kv_heads "
                 f"{self.kv_heads}")
        if min(self.hidden, self.layers, self.heads, self.kv_heads, self.ffn, self.seq_len, self.batch,
               self.steps, self.eval_every, self.eval_windows, self.threads) < 1:
            _bad("sizes, steps, eval_every, eval_windows and threads must be >= 1")
        if self.stop_at is not None and not 0 < self.stop_at <= self.steps:
            _bad(f"stop_at {self.stop_at} must be in 1..steps ({self.steps})")
        if self.max_minutes is not None and self.max_minutes <= 0:
            _bad(f"max_minutes must be > 0, got {self.max_minutes}")

    @classmethod
    def from_json(cls, path: str | Path) -> TinyConfig:
        """A config file: a JSON object of TinyConfig fields (any subset; the rest keep their defaults)."""
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise MpsimInputError(f"{path}: cannot read a JSON config ({exc})") from None
        if not isinstance(raw, dict):
            raise MpsimInputError(f"{path}: expected a JSON object of train-tiny settings")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise MpsimInputError(f"{path}: unknown train-tiny setting(s) {', '.join(unknown)}; "
                                  f"expected any of {', '.join(sorted(known))}")
        try:
            return cls(**raw)
        except MpsimInputError as exc:
            raise MpsimInputError(f"{path}: {exc}") from None

    def params(self) -> int:
        """Parameter count of the model this config trains."""
        s = self.spec()
        per_layer = (2 * s.hidden * s.q_dim + 2 * s.hidden * s.kv_dim + 3 * s.hidden * s.ffn + 2 * s.hidden)
        return s.num_layers * per_layer + 2 * s.vocab * s.hidden + s.hidden

    def spec(self) -> ModelSpec:
        return ModelSpec("tiny", self.layers, self.hidden, self.ffn, self.heads, self.kv_heads,
                         self.hidden // self.heads, 256, source="mpsim train-tiny (this repo)")


def _bad(what: str) -> NoReturn:
    raise MpsimInputError(f"train-tiny config: {what}")


def hf_config(cfg: TinyConfig) -> dict[str, object]:
    s = cfg.spec()
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": cfg.name,
        "hidden_size": s.hidden, "intermediate_size": s.ffn, "num_hidden_layers": s.num_layers,
        "num_attention_heads": s.num_heads, "num_key_value_heads": s.num_kv_heads, "vocab_size": s.vocab,
        "rms_norm_eps": s.norm_eps, "rope_theta": s.rope_theta, "max_position_embeddings": 1024,
        "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float16",
        "bos_token_id": None, "eos_token_id": None, "mpsim_tokenizer": "bytes (token id = byte value)",
    }


def _lr(cfg: TinyConfig, step: int) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _batch(data: torch.Tensor, cfg: TinyConfig, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(data) - cfg.seq_len - 1, (cfg.batch,), generator=gen)
    return torch.stack([data[s:s + cfg.seq_len + 1] for s in starts.tolist()]).long()


@torch.no_grad()
def _eval(model: TorchLlama, heldout: torch.Tensor, cfg: TinyConfig) -> float:
    model.eval()
    stride = (len(heldout) - cfg.seq_len - 1) // cfg.eval_windows
    ids = torch.stack([heldout[i * stride:i * stride + cfg.seq_len + 1] for i in range(cfg.eval_windows)])
    loss = float(model.loss(ids.long()))
    model.train()
    return bits_per_byte(loss)


def train_tiny(out_dir: Path, cfg: TinyConfig = TinyConfig()) -> Path:
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    gen = torch.Generator().manual_seed(cfg.seed)
    data = torch.from_numpy(load_corpus("train", cfg.train_bytes).copy())
    heldout = torch.from_numpy(load_corpus("heldout", 1_000_000).copy())
    model = TorchLlama(cfg.spec(), cfg.seq_len)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    check_output(out_dir, folder=True)  # before training, not after
    log_rows: list[dict[str, float]] = []
    t0 = time.perf_counter()
    last = cfg.steps if cfg.stop_at is None else cfg.stop_at
    for step in range(last + 1):
        out_of_time = cfg.max_minutes is not None and time.perf_counter() - t0 > 60 * cfg.max_minutes
        if out_of_time and 0 < step < last:  # at least one step, so stop_at is a valid setting
            print(f"stopping at step {step}: past max_minutes {cfg.max_minutes}", flush=True)
            last = step
            cfg = dataclasses.replace(cfg, stop_at=step, max_minutes=None)
        if step % cfg.eval_every == 0 or step == last:
            row = {"step": step, "heldout_bpb": _eval(model, heldout, cfg),
                   "train_bpb": log_rows[-1]["train_bpb"] if log_rows else float("nan"),
                   "elapsed_s": time.perf_counter() - t0}
            log_rows.append(row)
            print(f"step {step:5d}  held-out {row['heldout_bpb']:.3f} bits/byte  ({row['elapsed_s']:.0f} s)",
                  flush=True)
        if step == last:
            break
        for g in opt.param_groups:
            g["lr"] = _lr(cfg, step)
        loss = model.loss(_batch(data, cfg, gen))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if log_rows:
            log_rows[-1]["train_bpb"] = bits_per_byte(float(loss.detach()))
    _save(model, cfg, out_dir, log_rows)
    return out_dir


def _save(model: TorchLlama, cfg: TinyConfig, out_dir: Path, log_rows: list[dict[str, float]]) -> None:
    from safetensors.torch import save_file

    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    atomic_write(out_dir / "model.safetensors",
                 lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"}))
    write_text_atomic(json.dumps(hf_config(cfg), indent=2) + "\n", out_dir / "config.json")
    write_text_atomic(json.dumps(asdict(cfg), indent=2) + "\n", out_dir / "train_config.json")
    log = io.StringIO(newline="")
    writer = csv.DictWriter(log, fieldnames=list(log_rows[0]))
    writer.writeheader()
    writer.writerows(log_rows)
    write_text_atomic(log.getvalue(), out_dir / "train_log.csv")
    _plot(log_rows, out_dir / "loss.png", f"{cfg.name}: byte-level Llama ({cfg.params() / 1e6:.1f} M) "
          "on Python stdlib sources")


def _plot(rows: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([r["step"] for r in rows])
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(steps, [r["heldout_bpb"] for r in rows], marker="o", label="held-out stdlib files")
    ax.plot(steps[1:], [r["train_bpb"] for r in rows[1:]], marker=".", alpha=0.7, label="training batch")
    ax.set_xlabel("training step")
    ax.set_ylabel("bits per byte")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        write_figure_atomic(fig, path)
    finally:
        plt.close(fig)
